// Live approvals inbox: "approval.requested" events on the "approvals" topic become rows of the pending
// table (socket, reconnects and indicator: live-table.js, loaded first). The cells mirror
// templates/dashboard/approvals/inbox.html; resolved rows are marked by approvals-badge.js.
(function () {
  "use strict";

  const live = window.ToolgateLive;
  const table = document.querySelector("[data-approvals-live]");
  if (!live || !table) return;

  const config = live.readJson("approvals-live-config");
  const PLACEHOLDER = "00000000-0000-0000-0000-000000000000";

  function csrfToken() {
    const input = document.querySelector("#csrf-holder [name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function button(label, value, className) {
    const node = live.el("button", label, "button " + className);
    node.type = "submit";
    node.name = "decision";
    node.value = value;
    return node;
  }

  function buildRow(data) {
    const row = document.createElement("tr");
    live.cell(row, "time-cell").append(live.timeNode(data.created_at));

    const agent = live.cell(row);
    agent.append(live.el("code", data.agent));
    const session = live.el("div", data.session_key || "—", "mono small muted session");
    session.title = "Session key";
    agent.append(session);

    const command = live.cell(row);
    command.append(live.el("code", data.command, "command"));
    command.append(live.el("div", data.reason, "small muted reason"));

    live.cell(row, "time-cell").append(live.timeNode(data.expires_at));

    const actions = live.cell(row, "approval-actions");
    actions.dataset.status = "pending";
    const form = live.el("form", null, "actions");
    form.method = "post";
    form.action = config.decide_url.replace(PLACEHOLDER, data.id);
    const csrf = document.createElement("input");
    csrf.type = "hidden";
    csrf.name = "csrfmiddlewaretoken";
    csrf.value = csrfToken();
    const label = live.el("label", "Reason", "visually-hidden");
    label.htmlFor = "reason-" + data.id;
    const reason = document.createElement("input");
    reason.id = "reason-" + data.id;
    reason.name = "reason";
    reason.maxLength = 500;
    reason.placeholder = "Reason (optional)";
    const deny = live.el("a", "Deny…", "button danger");
    deny.href = config.deny_url.replace(PLACEHOLDER, data.id);
    form.append(csrf, label, reason, button("Allow once", "allow-once", "primary"), " ",
      button("Allow always", "allow-always", ""), " ", deny);
    actions.append(form);
    return row;
  }

  live.start({
    table: table,
    topic: "approvals",
    eventType: "approval.requested",
    matches: function (data) { return data.status === "pending"; },
    buildRow: buildRow,
  });
})();
