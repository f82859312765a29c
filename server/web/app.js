// The chat page: keeps the conversation, streams each answer from
// /v1/chat/completions (server-sent events), and shows reasoning collapsed
// above the answer, the model's name, and the answer's speed.
"use strict";

const $ = (id) => document.getElementById(id);
const log = $("log"), input = $("input"), send = $("send"), stop = $("stop"), stats = $("stats");
let history = []; // {role, content}
let controller = null;
let modelName = "";

function authHeaders() {
  const key = localStorage.getItem("latent-api-key");
  return key ? { Authorization: "Bearer " + key } : {};
}

// api fetches path, asking once for the API key when the server wants one.
async function api(path, init) {
  for (let attempt = 0; ; attempt++) {
    const opts = Object.assign({}, init || {});
    opts.headers = Object.assign({ "Content-Type": "application/json" }, authHeaders(), opts.headers || {});
    const res = await fetch(path, opts);
    if (res.status !== 401 || attempt > 0) return res;
    const key = window.prompt("This server needs an API key:");
    if (!key) return res;
    localStorage.setItem("latent-api-key", key);
  }
}

async function loadModel() {
  try {
    const res = await api("v1/models");
    const body = await res.json();
    modelName = body.data[0].id;
    $("model").textContent = modelName;
    document.title = modelName + " · latent";
  } catch (e) {
    $("model").textContent = "(model unknown)";
  }
}

function addMessage(role, text) {
  $("empty")?.remove();
  const div = document.createElement("div");
  div.className = "msg " + role;
  if (role === "user") {
    div.textContent = text;
  } else {
    div.innerHTML = '<details class="reasoning" hidden><summary>Reasoning</summary><div class="thoughts"></div></details>' +
      '<div class="content"></div><div class="meta"></div>';
  }
  log.appendChild(div);
  log.scrollTop = log.scrollHeight;
  return div;
}

function setBusy(busy) {
  send.disabled = busy;
  send.hidden = busy;
  stop.hidden = !busy;
  document.body.dataset.state = busy ? "streaming" : "idle";
}

// readEvents yields the data of each server-sent event of a response.
async function* readEvents(res) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const event = buf.slice(0, end);
      buf = buf.slice(end + 2);
      const data = event.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
      if (data) yield data;
    }
  }
}

async function ask(text) {
  const convo = history; // "New chat" replaces history: this answer must not land in the new one
  convo.push({ role: "user", content: text });
  addMessage("user", text);
  const div = addMessage("assistant", "");
  div.classList.add("streaming");
  const details = div.querySelector(".reasoning"), thoughts = div.querySelector(".thoughts");
  const content = div.querySelector(".content"), meta = div.querySelector(".meta");
  let answer = "", reasoning = "", pending = false, finish = "", timing = null, failed = false, ended = false;

  const draw = () => {
    pending = false;
    const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40; // follow the answer unless the reader scrolled up
    try {
      content.innerHTML = renderMarkdown(answer);
    } catch (e) { // the page must not stay busy over a rendering failure: show the text as it is
      content.textContent = answer;
    }
    if (reasoning) {
      details.hidden = false;
      thoughts.textContent = reasoning;
    }
    if (atBottom) log.scrollTop = log.scrollHeight;
  };
  // Each draw renders the whole answer again: a long one is drawn less often
  // (up to twice a second at 1 MB), or its streaming would cost the square of its length.
  let lastDraw = 0;
  const schedule = () => {
    if (pending) return;
    pending = true;
    const wait = Math.min(500, answer.length / 2000) - (performance.now() - lastDraw);
    const frame = () => requestAnimationFrame(() => { lastDraw = performance.now(); draw(); });
    if (wait > 0) setTimeout(frame, wait); else frame();
  };

  const messages = [];
  const system = $("system").value.trim();
  if (system) messages.push({ role: "system", content: system });
  messages.push(...convo);
  const body = { model: modelName, messages: messages, stream: true, stream_options: { include_usage: true } };
  const temperature = $("temperature").value, maxTokens = $("max-tokens").value;
  if (temperature !== "") body.temperature = Number(temperature);
  if (maxTokens !== "") body.max_tokens = Number(maxTokens);

  controller = new AbortController();
  setBusy(true);
  const started = performance.now();
  try {
    const res = await api("v1/chat/completions", { method: "POST", body: JSON.stringify(body), signal: controller.signal });
    if (!res.ok) {
      const err = await res.json().catch(() => ({}));
      throw new Error((err.error && err.error.message) || res.status + " " + res.statusText);
    }
    for await (const data of readEvents(res)) {
      if (data === "[DONE]") { ended = true; break; }
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message);
      const choice = chunk.choices && chunk.choices[0];
      if (choice) {
        if (choice.delta.content) answer += choice.delta.content;
        if (choice.delta.reasoning_content) reasoning += choice.delta.reasoning_content;
        if (choice.finish_reason) finish = choice.finish_reason;
        schedule();
      }
      if (chunk.timings) timing = chunk.timings;
    }
    if (!ended) throw new Error("the connection closed before the answer finished");
  } catch (e) {
    if (e.name === "AbortError") {
      finish = "stopped";
    } else {
      failed = true;
      div.classList.add("error");
      answer += (answer ? "\n\n" : "") + "Error: " + e.message;
    }
  } finally {
    controller = null;
    draw();
    div.classList.remove("streaming");
    const secs = (performance.now() - started) / 1000;
    let line = finish === "stopped" ? "stopped" : finish === "length" ? "cut at the token limit" : "";
    if (timing) {
      const speed = timing.predicted_per_second.toFixed(1) + " tokens/s";
      stats.textContent = speed;
      line = [timing.predicted_n + " tokens", speed, secs.toFixed(1) + " s", line].filter(Boolean).join(" · ");
    }
    meta.textContent = line;
    div.dataset.done = "true";
    if (failed || (finish === "stopped" && !answer)) {
      convo.pop(); // the question goes unanswered: it comes back to the input, to ask again
      if (convo === history && !input.value) input.value = text;
    } else {
      convo.push({ role: "assistant", content: answer });
    }
    setBusy(false);
    input.focus();
  }
}

$("form").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = input.value.replace(/^\s*\n/, "").trimEnd(); // a pasted block keeps its indentation
  if (!text.trim() || controller) return;
  input.value = "";
  ask(text);
});
input.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    $("form").requestSubmit();
  }
});
stop.addEventListener("click", () => controller && controller.abort());
$("new").addEventListener("click", () => {
  if (controller) controller.abort();
  history = [];
  log.innerHTML = '<p id="empty" class="hint">Ask something. Enter sends, Shift+Enter starts a new line.</p>';
  stats.textContent = "";
});

setBusy(false);
loadModel();
