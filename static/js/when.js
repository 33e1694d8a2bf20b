// One timestamp format: every <time datetime> the server renders (templatetags/when.py) or the live
// rows insert shows the browser's local time as "YYYY-MM-DD HH:MM:SS", its title keeping the UTC time.
// Live scripts build their time cells with window.toolgateWhen(element, iso); a MutationObserver also
// catches any <time datetime> inserted otherwise. Dates without a time are left as they are.
(function () {
  "use strict";

  const local = new Intl.DateTimeFormat("en-CA", {
    year: "numeric", month: "2-digit", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23",
  });

  function pad(n) {
    return String(n).padStart(2, "0");
  }

  function utcText(date) {
    return date.getUTCFullYear() + "-" + pad(date.getUTCMonth() + 1) + "-" + pad(date.getUTCDate()) + " " +
      pad(date.getUTCHours()) + ":" + pad(date.getUTCMinutes()) + ":" + pad(date.getUTCSeconds()) + " UTC";
  }

  function localText(date) {
    const parts = {};
    local.formatToParts(date).forEach(function (part) { parts[part.type] = part.value; });
    return parts.year + "-" + parts.month + "-" + parts.day + " " + parts.hour + ":" + parts.minute + ":" + parts.second;
  }

  // Sets (or, without iso, re-reads) the element's timestamp; returns the element.
  function when(node, iso) {
    const value = iso || node.getAttribute("datetime") || "";
    if (!value.includes("T")) return node; // a date: nothing to convert
    const date = new Date(value);
    if (isNaN(date.getTime())) return node;
    node.setAttribute("datetime", date.toISOString().replace(/\.\d{3}Z$/, "Z"));
    node.title = utcText(date);
    node.textContent = localText(date);
    node.dataset.whenLocal = "";
    return node;
  }

  function scan(root) {
    if (root.nodeType !== 1) return;
    if (root.matches("time[datetime]") && !("whenLocal" in root.dataset)) when(root);
    root.querySelectorAll("time[datetime]:not([data-when-local])").forEach(function (node) { when(node); });
  }

  window.toolgateWhen = when;
  scan(document.documentElement);
  new MutationObserver(function (changes) {
    changes.forEach(function (change) { change.addedNodes.forEach(scan); });
  }).observe(document.documentElement, { childList: true, subtree: true });
})();
