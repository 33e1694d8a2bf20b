// The sandbox page, live over the page's one socket (live-socket.js): a container made or removed on
// the tenant's "sandbox" topic reloads the containers table (htmx fetches the fragment, as it does every
// 10 seconds for the engine's figures), and the row of a container that was just made flashes.
(function () {
  "use strict";

  const socket = window.ToolgateSocket;
  const holder = document.getElementById("sandbox-live-config");
  const box = document.getElementById("sandbox-containers");
  if (!socket || !holder || !box) return;

  const config = JSON.parse(holder.textContent);
  const CHANGES = { "sandbox.container.created": true, "sandbox.container.removed": true };
  let fresh = null; // the id of a container made a moment ago

  // A session that ended answers the fragment with the login page (after a redirect): keep the table.
  document.body.addEventListener("htmx:beforeSwap", function (event) {
    if (event.target !== box) return;
    const url = event.detail.xhr && event.detail.xhr.responseURL;
    if (url && new URL(url).pathname !== new URL(box.getAttribute("hx-get"), window.location.href).pathname) {
      event.detail.shouldSwap = false;
    }
  });

  document.body.addEventListener("htmx:afterSwap", function (event) {
    if (event.target !== box || !fresh) return;
    const row = box.querySelector('tr[data-id="' + CSS.escape(String(fresh)) + '"]');
    if (row) row.classList.add("is-new");
    fresh = null;
  });

  socket.bindIndicator(document.querySelector("[data-live-indicator]"), "changes");
  socket.subscribe(config.topic, function (event) {
    if (!CHANGES[event.type] || !window.htmx) return;
    if (event.type === "sandbox.container.created" && event.data) fresh = event.data.id;
    window.htmx.trigger(document.body, "sandbox-changed");
  });
})();
