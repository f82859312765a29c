// A small Markdown renderer for model answers: fenced code blocks (an
// unclosed fence while streaming is code to the end), headings, lists, block
// quotes, rules, paragraphs, and inline code, bold, italics and http(s)
// links. Every piece of text is HTML-escaped before any markup is added, so
// model output can never inject HTML.
"use strict";

function escapeHTML(s) {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;").replace(/'/g, "&#39;");
}

// inline formats one line or paragraph of text (not yet escaped).
function renderInline(text) {
  // Code spans first: nothing inside them is formatted.
  const parts = text.split(/(`+)([\s\S]*?[^`])\1(?!`)/);
  let out = "";
  for (let i = 0; i < parts.length; i++) {
    if (i % 3 === 0) {
      out += formatText(escapeHTML(parts[i]));
    } else if (i % 3 === 2) {
      out += "<code>" + escapeHTML(parts[i].trim() === "" ? parts[i] : parts[i].replace(/^ (.*) $/, "$1")) + "</code>";
    }
  }
  return out;
}

// formatText adds emphasis and links to already escaped text.
function formatText(s) {
  return s
    .replace(/\[([^\]\n]+)\]\((https?:\/\/[^\s)]+)\)/g, '<a href="$2" target="_blank" rel="noopener noreferrer">$1</a>')
    .replace(/\*\*(?=\S)([\s\S]*?\S)\*\*/g, "<strong>$1</strong>")
    .replace(/__(?=\S)([\s\S]*?\S)__/g, "<strong>$1</strong>")
    .replace(/(^|[^*\w])\*(?=\S)([^*\n]*?\S)\*(?!\w)/g, "$1<em>$2</em>")
    .replace(/(^|[^_\w])_(?=\S)([^_\n]*?\S)_(?!\w)/g, "$1<em>$2</em>");
}

function renderMarkdown(src) {
  const lines = src.replace(/\r\n?/g, "\n").split("\n");
  let html = "";
  let para = [];
  let list = null; // {tag, items}
  let quote = [];

  const flushPara = () => {
    if (para.length) html += "<p>" + para.map(renderInline).join("<br>") + "</p>";
    para = [];
  };
  const flushList = () => {
    if (list) html += "<" + list.tag + ">" + list.items.map((it) => "<li>" + renderInline(it) + "</li>").join("") + "</" + list.tag + ">";
    list = null;
  };
  const flushQuote = () => {
    if (quote.length) html += "<blockquote>" + renderMarkdown(quote.join("\n")) + "</blockquote>";
    quote = [];
  };
  const flushAll = () => { flushPara(); flushList(); flushQuote(); };

  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = line.match(/^\s*(```+|~~~+)\s*([\w+#.-]*)/);
    if (fence) {
      flushAll();
      const close = new RegExp("^\\s*" + fence[1][0] + "{" + fence[1].length + ",}\\s*$");
      const code = [];
      i++;
      while (i < lines.length && !close.test(lines[i])) code.push(lines[i++]);
      const lang = fence[2] ? ' class="language-' + escapeHTML(fence[2]) + '"' : "";
      html += "<pre><code" + lang + ">" + escapeHTML(code.join("\n")) + "</code></pre>";
      continue;
    }
    if (/^\s*>/.test(line)) {
      flushPara(); flushList();
      quote.push(line.replace(/^\s*> ?/, ""));
      continue;
    }
    flushQuote();
    const heading = line.match(/^(#{1,6})\s+(.*)$/);
    if (heading) {
      flushAll();
      const n = heading[1].length;
      html += "<h" + n + ">" + renderInline(heading[2].replace(/\s+#+\s*$/, "")) + "</h" + n + ">";
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
      flushAll();
      html += "<hr>";
      continue;
    }
    const item = line.match(/^\s*(?:([-*+])|(\d+)[.)])\s+(.*)$/);
    if (item) {
      flushPara();
      const tag = item[1] ? "ul" : "ol";
      if (list && list.tag !== tag) flushList();
      if (!list) list = { tag: tag, items: [] };
      list.items.push(item[3]);
      continue;
    }
    if (line.trim() === "") {
      flushAll();
      continue;
    }
    if (list && /^\s+\S/.test(line)) {
      list.items[list.items.length - 1] += " " + line.trim();
      continue;
    }
    flushList();
    para.push(line);
  }
  flushAll();
  return html;
}

window.renderMarkdown = renderMarkdown;
window.escapeHTML = escapeHTML;
