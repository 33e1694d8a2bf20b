// The policy editor (templates/dashboard/policy/edit.html):
// - live explain: while the document or the context changes, the draft is sent (debounced) to the
//   dashboard's explain endpoint (same-origin session + CSRF), which validates it and answers which tools
//   it adds and removes for the chosen agent and context, and which step decides each tool;
// - live changes: on the page's socket (live-socket.js, topic "policy"), a new version of this same scope shows a notice, so a
//   save is never made blindly over another admin's change (the server refuses such a save anyway).
// Everything from the server is shown with textContent only.
(function () {
  "use strict";

  const configNode = document.getElementById("policy-editor-config");
  if (!configNode) return;
  const config = JSON.parse(configNode.textContent || "{}");
  const DEBOUNCE_MS = 350;

  function el(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = text;
    if (className) node.className = className;
    return node;
  }

  function sameScope(data) {
    const scope = config.scope || {};
    return (
      data.scope === scope.scope &&
      (data.agent || null) === (scope.agent || null) &&
      (data.channel || null) === (scope.channel || null) &&
      (data.chat_id || null) === (scope.chat_id || null)
    );
  }

  // --- live changes ------------------------------------------------------------------------------------

  const changed = document.querySelector("[data-policy-changed]");
  let base = Number(config.base || 0);

  function showChanged(data) {
    if (!changed) return;
    const text = changed.querySelector("[data-policy-changed-text]");
    const what = data.version ? "to version " + data.version : "";
    const how = data.note ? " (" + data.note + ")" : "";
    text.textContent = (what + how).trim() || "by someone else";
    changed.hidden = false;
    changed.dataset.version = String(data.version || "");
  }

  function watch() {
    const socket = window.ToolgateSocket;
    if (!socket) return;
    socket.onState(function (state) {
      document.body.dataset.policyLive = state === "live" ? "live" : "offline";
    });
    socket.subscribe("policy", function (event) {
      const data = event.data || {};
      if (sameScope(data) && Number(data.version || 0) > base) showChanged(data);
    });
  }

  watch();

  // --- live explain ------------------------------------------------------------------------------------

  const form = document.querySelector("[data-policy-form]");
  const panel = document.querySelector("[data-explain]");
  if (!form || !panel) return;
  const textarea = form.querySelector("textarea[name=document]");
  const csrf = form.querySelector("input[name=csrfmiddlewaretoken]");
  const state = panel.querySelector("[data-explain-state]");
  const errors = panel.querySelector("[data-explain-errors]");
  const warnings = panel.querySelector("[data-explain-warnings]");
  const note = panel.querySelector("[data-explain-message]");
  const summary = panel.querySelector("[data-explain-summary]");
  const addedList = panel.querySelector("[data-explain-added]");
  const removedList = panel.querySelector("[data-explain-removed]");
  const table = panel.querySelector("[data-explain-table]");
  const contextRoot = panel.querySelector("[data-explain-context]");

  function field(name) {
    const node = contextRoot.querySelector("[name=" + name + "]");
    return node ? node.value : "";
  }

  function context() {
    return {
      agent: field("agent"),
      provider: field("provider"),
      channel: field("channel"),
      chat_id: field("chat_id"),
      subagent_depth: parseInt(field("subagent_depth") || "0", 10) || 0,
    };
  }

  function fill(list, names) {
    list.replaceChildren();
    if (!names.length) {
      list.append(el("li", "nothing", "muted"));
      return;
    }
    names.forEach(function (name) {
      list.append(el("li", name, "mono"));
    });
  }

  function render(result) {
    errors.replaceChildren();
    errors.hidden = true;
    warnings.hidden = true;
    note.hidden = true;
    summary.hidden = true;
    table.hidden = true;
    const problems = result.errors || {};
    const paths = Object.keys(problems);
    if (!result.valid) {
      const ul = el("ul");
      paths.forEach(function (path) {
        (problems[path] || []).forEach(function (message) {
          const li = el("li");
          li.append(el("code", path), ": " + message);
          ul.append(li);
        });
      });
      errors.append(el("p", "The draft cannot be saved as it is:"), ul);
      errors.hidden = false;
      state.textContent = "Draft invalid";
      state.dataset.state = "invalid";
      return;
    }
    if ((result.warnings || []).length) {
      warnings.textContent = "Warnings: " + result.warnings.join(" ");
      warnings.hidden = false;
    }
    if (!result.agent) {
      note.textContent = result.message || "";
      note.hidden = false;
      state.textContent = "Draft valid";
      state.dataset.state = "valid";
      return;
    }
    fill(addedList, result.added || []);
    fill(removedList, result.removed || []);
    summary.hidden = false;
    const tbody = table.tBodies[0];
    tbody.replaceChildren();
    (result.tools || []).forEach(function (tool) {
      const row = tbody.insertRow();
      row.dataset.tool = tool.tool;
      if (tool.change) row.className = "change-" + tool.change;
      row.insertCell().append(el("code", tool.tool));
      const stateCell = row.insertCell();
      stateCell.append(
        el("span", tool.allowed ? "allowed" : "removed", tool.allowed ? "state-allowed" : "state-removed")
      );
      if (tool.change) stateCell.append(el("span", " (" + (tool.change === "added" ? "added by the draft" : "removed by the draft") + ")", "small"));
      const decided = row.insertCell();
      decided.append(el("span", tool.decided_by, "mono small"));
    });
    table.hidden = false;
    const changes = (result.added || []).length + (result.removed || []).length;
    state.textContent =
      "For agent " + result.agent + ": " + (changes ? changes + " tool" + (changes === 1 ? "" : "s") + " change" : "no change");
    state.dataset.state = "explained";
  }

  let timer = null;
  let sequence = 0;

  function explain() {
    sequence += 1;
    const mine = sequence;
    state.textContent = "Checking…";
    state.dataset.state = "checking";
    fetch(config.url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf ? csrf.value : "" },
      body: JSON.stringify({ scope: config.scope, document: textarea.value, context: context() }),
    })
      .then(function (response) {
        return response.json().then(function (body) {
          return { ok: response.ok, body: body };
        });
      })
      .then(function (answer) {
        if (mine !== sequence) return; // a newer draft is on its way
        if (!answer.ok) {
          const message = (answer.body && answer.body.error && answer.body.error.message) || "refused";
          render({ valid: false, errors: { request: [message] } });
          return;
        }
        render(answer.body);
      })
      .catch(function () {
        if (mine !== sequence) return;
        state.textContent = "Explain unavailable (offline?)";
        state.dataset.state = "error";
      });
  }

  function schedule() {
    if (timer) window.clearTimeout(timer);
    timer = window.setTimeout(explain, DEBOUNCE_MS);
  }

  textarea.addEventListener("input", schedule);
  contextRoot.addEventListener("input", schedule);
  contextRoot.addEventListener("change", schedule);
  explain();
})();
