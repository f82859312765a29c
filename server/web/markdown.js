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

// formatText adds links and emphasis to already escaped text. Links are set
// aside while the emphasis is added, so that a URL's underscores and the
// anchor's own attributes stay as they are; a URL may hold one level of
// balanced parentheses (Wikipedia's).
function formatText(s) {
  const links = [];
  s = s.replace(/\[([^\]\n]+)\]\((https?:\/\/(?:[^\s()]|\([^\s()]*\))+)\)/g, (m, label, url) => {
    links.push('<a href="' + url + '" target="_blank" rel="noopener noreferrer">' + emphasize(label) + "</a>");
    return "\u0000" + (links.length - 1) + "\u0000";
  });
  return emphasize(s).replace(/\u0000(\d+)\u0000/g, (m, i) => links[i] ?? m);
}

// emphasize adds bold and italics to already escaped text.
function emphasize(s) {
  return s
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
    const start = list && list.start !== 1 ? ' start="' + list.start + '"' : "";
    if (list) html += "<" + list.tag + start + ">" + list.items.map((it) => "<li>" + renderInline(it) + "</li>").join("") + "</" + list.tag + ">";
    list = null;
  };
  const itemRe = /^\s*(?:([-*+])|(\d+)[.)])\s+(.*)$/;
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
    const item = line.match(itemRe);
    if (item) {
      flushPara();
      const tag = item[1] ? "ul" : "ol";
      if (list && list.tag !== tag) flushList();
      if (!list) list = { tag: tag, items: [], start: item[2] ? Number(item[2]) : 1 };
      list.items.push(item[3]);
      continue;
    }
    if (line.trim() === "") {
      if (list) { // a loose list goes on after its blank lines: one list, numbered on
        let j = i + 1;
        while (j < lines.length && lines[j].trim() === "") j++;
        const next = j < lines.length ? lines[j] : "", m = next.match(itemRe);
        if ((m && (m[1] ? "ul" : "ol") === list.tag) || /^\s+\S/.test(next)) continue;
      }
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
