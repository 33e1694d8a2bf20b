// The knowledge graph pages of an agent, live for administrators over the page's one socket
// (live-socket.js): when an entity or a relation of this agent changes elsewhere, the page says so and
// offers a reload (it never reloads by itself: a half-filled form would be lost). On an entity's page,
// its deletion is said plainly. Event data only ever becomes text, never markup.
(function () {
  "use strict";

  const socket = window.ToolgateSocket;
  const holder = document.getElementById("knowledge-live-config");
  const notice = document.querySelector("[data-live-notice]");
  if (!socket || !holder || !notice) return;

  const config = JSON.parse(holder.textContent);
  const text = notice.querySelector("li");

  function show(message) {
    if (message) {
      text.textContent = message + " ";
      const reload = document.createElement("a");
      reload.href = window.location.href;
      reload.textContent = "Reload";
      text.append(reload);
    }
    notice.hidden = false;
  }

  socket.bindIndicator(document.querySelector("[data-live-indicator]"), "changes");
  socket.subscribe("knowledge", function (event) {
    const data = event.data || {};
    if (typeof event.type !== "string" || event.type.indexOf("knowledge.") !== 0) return;
    if (data.agent !== config.agent) return;
    if (config.entity && event.type === "knowledge.entity_deleted" && data.id === config.entity) {
      show("This entity has been deleted.");
      return;
    }
    show("");
  });
})();
