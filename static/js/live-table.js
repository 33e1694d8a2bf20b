// Live tables: a small module shared by the dashboard pages that prepend rows as events arrive on
// /ws/events/ (the audit log, the tool-call log, the approvals inbox). The page's one socket and its
// reconnects are live-socket.js's; this keeps the live indicator and the rows; a page only says which
// topic and event type it wants, which events match its filters, and how one event becomes a row.
// Helpers build nodes with textContent only, so event data can never inject markup.
(function () {
  "use strict";

  // One line of JSON with sorted keys, like the server's compact_json filter.
  function toJson(v) {
    if (Array.isArray(v)) return "[" + v.map(toJson).join(", ") + "]";
    if (v && typeof v === "object") {
      return "{" + Object.keys(v).sort().map(function (k) { return JSON.stringify(k) + ": " + toJson(v[k]); }).join(", ") + "}";
    }
    return JSON.stringify(v);
  }

  function sortKeys(v) {
    if (Array.isArray(v)) return v.map(sortKeys);
    if (v && typeof v === "object") {
      const out = {};
      Object.keys(v).sort().forEach(function (k) { out[k] = sortKeys(v[k]); });
      return out;
    }
    return v;
  }

  // Indented JSON with sorted keys, like the server's pretty_json filter.
  function prettyJson(v) {
    return JSON.stringify(sortKeys(v), null, 2);
  }

  function truncate(text, limit) {
    return text.length <= limit ? text : text.slice(0, limit - 1) + "…";
  }

  function summary(value, limit) {
    if (value === null || value === undefined || value === "") return "";
    if (typeof value === "object" && Object.keys(value).length === 0) return "";
    return truncate(toJson(value), limit);
  }

  function el(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = text;
    if (className) node.className = className;
    return node;
  }

  function cell(row, className) {
    const td = row.insertCell();
    if (className) td.className = className;
    return td;
  }

  // A <time> like the server's {% when %}: local time, UTC in its title (when.js).
  function timeNode(iso) {
    return window.toolgateWhen(el("time"), iso);
  }

  // start({table, topic, eventType, matches(data), buildRow(data) -> <tr>}): run one live table.
  function start(options) {
    const table = options.table;
    const indicator = document.querySelector("[data-live-indicator]");
    if (!table || !indicator || !window.ToolgateSocket) return;

    const tbody = table.tBodies[0];
    const maxRows = parseInt(table.dataset.maxRows || "50", 10);
    const matches = options.matches || function () { return true; };

    function addRow(data) {
      if (!data || !data.id || !matches(data)) return;
      if (tbody.querySelector('tr[data-id="' + CSS.escape(data.id) + '"]')) return;
      const empty = tbody.querySelector("tr.empty");
      if (empty) empty.remove();

      const row = options.buildRow(data);
      row.dataset.id = data.id;
      row.classList.add("is-new");
      tbody.insertBefore(row, tbody.firstChild);
      while (tbody.rows.length > maxRows) tbody.deleteRow(-1);
    }

    window.ToolgateSocket.bindIndicator(indicator, "events");
    window.ToolgateSocket.subscribe(options.topic, function (event) {
      if (event.type === options.eventType) addRow(event.data);
    });
  }

  // The page's configuration, rendered by the server with json_script (never markup).
  function readJson(id) {
    const node = document.getElementById(id);
    return node ? JSON.parse(node.textContent || "{}") : {};
  }

  // A cell's value as a filter of the table, keeping the page's other filters (as the server's
  // filter_url tag does) and starting again from the first page.
  function filterHref(changes) {
    const params = new URLSearchParams(window.location.search);
    params.delete("page");
    params.delete("format");
    Object.keys(changes).forEach(function (name) { params.set(name, changes[name]); });
    return "?" + params.toString();
  }

  function link(href, child, className) {
    const a = document.createElement("a");
    a.href = href;
    if (className) a.className = className;
    a.append(child);
    return a;
  }

  // The detail page of a row of ``table`` (its data-detail-base, then the row's id).
  function detailHref(table, id) {
    return (table.dataset.detailBase || "") + encodeURIComponent(id) + "/";
  }

  window.ToolgateLive = {
    start: start,
    filterHref: filterHref,
    link: link,
    detailHref: detailHref,
    readJson: readJson,
    el: el,
    cell: cell,
    timeNode: timeNode,
    toJson: toJson,
    prettyJson: prettyJson,
    summary: summary,
    truncate: truncate,
  };
})();
