// Live audit log: new "audit.event" events on the "audit" topic become rows of the audit table
// (socket, reconnects and indicator: live-table.js, loaded first).
(function () {
  "use strict";

  const live = window.ToolgateLive;
  const table = document.querySelector("[data-audit-live]");
  if (!live || !table) return;

  const filters = live.readJson("audit-live-filters");
  const SUMMARY_CHARS = 160;

  const filterHref = live.filterHref;
  const link = live.link;
  function detailHref(id) { return live.detailHref(table, id); }

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

  // The same cells (and links) as templates/dashboard/audit/_table.html.
  function buildRow(data) {
    const row = document.createElement("tr");
    const open = link(detailHref(data.id), live.timeNode(data.created_at), "detail-link");
    open.title = "Open this event";
    live.cell(row, "nowrap").append(open);

    const actor = live.cell(row);
    const actorFilter = { actor_kind: data.actor.kind, actor_id: data.actor.id };
    actor.append(
      link(filterHref(actorFilter), data.actor.label || data.actor.id, "filter-link actor"),
      " ",
      link(filterHref({ actor_kind: data.actor.kind }), live.el("span", data.actor.kind, "badge"), "filter-link")
    );

    live.cell(row).append(live.el("code", data.verb));

    const target = live.cell(row);
    target.append(link(filterHref({ target_type: data.target.type }), data.target.type, "filter-link muted"));
    if (data.target.id) {
      const targetFilter = { target_type: data.target.type, target_id: data.target.id };
      target.append(" ", link(filterHref(targetFilter), live.el("code", live.truncate(data.target.id, 14), "small"), "filter-link"));
    }

    live.cell(row, "details mono small").append(link(detailHref(data.id), live.summary(data.data, SUMMARY_CHARS) || "{}", "detail-link"));
    return row;
  }

  live.start({ table: table, topic: "audit", eventType: "audit.event", matches: matches, buildRow: buildRow });
})();
