// Live audit log: new "audit.event" events on the "audit" topic become rows of the audit table
// (socket, reconnects and indicator: live-table.js, loaded first).
(function () {
  "use strict";

  const live = window.ToolgateLive;
  const table = document.querySelector("[data-audit-live]");
  if (!live || !table) return;

  const filters = live.readJson("audit-live-filters");
  const SUMMARY_CHARS = 160;
  const TITLE_CHARS = 4000;

  // The same filters the server applied to the page, so a live row never contradicts them.
  function matches(data) {
    if (filters.verb) {
      const verb = filters.verb;
      if (verb.endsWith("*") || verb.endsWith(".")) {
        if (!data.verb.startsWith(verb.replace(/\*+$/, ""))) return false;
      } else if (data.verb !== verb) {
        return false;
      }
    }
    if (filters.actor_kind && data.actor.kind !== filters.actor_kind) return false;
    if (filters.actor_id && data.actor.id !== filters.actor_id) return false;
    if (filters.target_type && data.target.type !== filters.target_type) return false;
    if (filters.target_id && data.target.id !== filters.target_id) return false;
    return true;
  }

  // The same cells as templates/dashboard/audit/_table.html.
  function buildRow(data) {
    const row = document.createElement("tr");
    live.cell(row, "nowrap").append(live.timeNode(data.created_at));

    const actor = live.cell(row);
    actor.append(live.el("span", data.actor.label || data.actor.id, "actor"), " ", live.el("span", data.actor.kind, "badge"));

    live.cell(row).append(live.el("code", data.verb));

    const target = live.cell(row);
    target.append(live.el("span", data.target.type, "muted"));
    if (data.target.id) target.append(" ", live.el("code", live.truncate(data.target.id, 14), "small"));

    const details = live.el("span", live.summary(data.data, SUMMARY_CHARS));
    details.title = live.summary(data.data, TITLE_CHARS);
    live.cell(row, "details mono small").append(details);
    return row;
  }

  live.start({ table: table, topic: "audit", eventType: "audit.event", matches: matches, buildRow: buildRow });
})();
