// The escalations inbox (one team's, or every team's): "escalation.created" events on the teams'
// topics ("team:<id>") become rows, "escalation.resolved" marks a row resolved, and "task.retried"
// marks the task's open escalations retried. The page's one socket is live-socket.js's. Rows mirror
// templates/dashboard/teams/escalations.html and are built with textContent only.
(function () {
  "use strict";

  const socket = window.ToolgateSocket;
  const configNode = document.getElementById("team-escalations-config");
  const table = document.querySelector("[data-escalations-live]");
  if (!socket || !configNode || !table) return;
  const config = JSON.parse(configNode.textContent || "{}");
  const tbody = table.tBodies[0];
  const maxRows = parseInt(table.dataset.maxRows || "50", 10);
  const ITEM = "00000000-0000-0000-0000-000000000000";
  const TEAM = "00000000-0000-0000-0000-000000000001";
  const LABELS = { open: "Open", retried: "Retried", resolved: "Resolved" };

  function el(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = text;
    if (className) node.className = className;
    return node;
  }

  function url(template, team, id) {
    return template.replace(TEAM, team).replace(ITEM, id);
  }

  function csrfToken() {
    const input = document.querySelector("#csrf-holder [name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  socket.bindIndicator(document.querySelector("[data-live-indicator]"), "escalations");

  function actionForm(action, label, className, team, id) {
    const form = el("form");
    form.method = "post";
    form.action = url(action === "retry" ? config.retry_url : config.resolve_url, team, id);
    form.dataset.action = action;
    const csrf = el("input");
    csrf.type = "hidden";
    csrf.name = "csrfmiddlewaretoken";
    csrf.value = csrfToken();
    const next = el("input");
    next.type = "hidden";
    next.name = "next";
    next.value = window.location.pathname + window.location.search;
    form.append(csrf, next);
    if (action === "retry") {
      const field = "retry-instructions-" + id;
      const caption = el("label", "New instructions (optional)", "small");
      caption.htmlFor = field;
      const text = el("textarea", null, "retry-instructions");
      text.id = field;
      text.name = "instructions";
      text.rows = 2;
      text.maxLength = 4000;
      form.append(caption, text);
    }
    const button = el("button", label, "button small " + className);
    button.type = "submit";
    form.append(button);
    return form;
  }

  function buildRow(data, ts) {
    const task = data.task;
    const row = el("tr");
    row.dataset.id = data.id;
    row.dataset.task = task.id;
    row.dataset.team = task.team;
    row.insertCell().append(window.toolgateWhen(el("time"), ts));
    row.cells[0].className = "time-cell";
    if (config.team_names) {
      row.insertCell().append(config.team_names[task.team] || task.team);
      row.cells[1].className = "team-cell";
    }
    const taskCell = row.insertCell();
    const link = el("a", task.identifier, "mono");
    link.href = url(config.task_url, task.team, task.id);
    taskCell.append(link, el("div", task.subject, "small"));
    const member = row.insertCell();
    member.append(el("code", data.member || "?"));
    if (data.notified_lead === false) member.append(el("div", "lead not notified", "small muted"));
    const blocker = row.insertCell();
    blocker.className = "blocker prewrap";
    blocker.textContent = data.blocker;
    const state = el("span", LABELS[data.state] || data.state, "escalation-state state-" + data.state);
    state.dataset.state = "";
    row.insertCell().append(state);
    if (config.can_act) {
      const actions = row.insertCell();
      actions.className = "escalation-actions";
      actions.append(actionForm("retry", "Retry", "primary", task.team, data.id), actionForm("resolve", "Resolve", "", task.team, data.id));
    }
    return row;
  }

  function setState(row, state) {
    const badge = row.querySelector("[data-state]");
    badge.textContent = LABELS[state];
    badge.className = "escalation-state state-" + state;
    if (state !== "open") row.querySelectorAll('form[data-action="retry"]').forEach(function (f) { f.remove(); });
    if (state === "resolved") row.querySelectorAll('form[data-action="resolve"]').forEach(function (f) { f.remove(); });
  }

  function onEvent(event) {
    const data = event.data || {};
    if (event.type === "escalation.created" && data.id && data.task) {
      if (config.state_filter && config.state_filter !== "open") return;
      if (tbody.querySelector('tr[data-id="' + CSS.escape(data.id) + '"]')) return;
      const empty = tbody.querySelector("tr.empty");
      if (empty) empty.remove();
      const row = buildRow(data, event.ts);
      row.classList.add("is-new");
      tbody.insertBefore(row, tbody.firstChild);
      while (tbody.rows.length > maxRows) tbody.deleteRow(-1);
    } else if (event.type === "escalation.resolved" && data.id) {
      const row = tbody.querySelector('tr[data-id="' + CSS.escape(data.id) + '"]');
      if (row) setState(row, "resolved");
    } else if (event.type === "task.retried" && data.id) {
      tbody.querySelectorAll('tr[data-task="' + CSS.escape(data.id) + '"]').forEach(function (row) {
        const badge = row.querySelector("[data-state]");
        if (badge && badge.classList.contains("state-open")) setState(row, "retried");
      });
    }
  }

  (config.topics || []).forEach(function (topic) {
    socket.subscribe(topic, onEvent);
  });
})();
