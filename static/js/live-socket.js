// One websocket per dashboard page, shared by every live part of it (live tables, the approvals badge,
// the policy editor): /ws/events/, authenticated by the session cookie (same origin). It keeps the
// page's subscriptions across reconnects (exponential backoff with jitter, 1 s, 2 s, 4 s … 30 s; at
// once when the browser comes back online or to the tab) and tells its listeners what state it is in.
//
//   ToolgateSocket.subscribe(topic, function (event) { … })   // {id, type, tenant, topic, data, ts}
//   ToolgateSocket.onState(function (state, info) { … })
//   ToolgateSocket.bindIndicator(element, "events")             // a page's live indicator
//     state: "connecting" | "live" | "reconnecting" | "error";
//     info: {reconnected: bool} when live (events sent while offline were missed),
//           {delayMs: n} when reconnecting, {message: text} on an error from the server.
(function () {
  "use strict";

  if (window.ToolgateSocket) return;
  if (!("WebSocket" in window)) {
    window.ToolgateSocket = { subscribe: function () {}, onState: function () {} };
    return;
  }

  const MAX_DELAY_MS = 30000;
  const handlers = {}; // topic -> [function(event)]
  const stateListeners = [];
  let socket = null;
  let live = false; // this socket's subscriptions confirmed
  let everLive = false;
  let attempt = 0;
  let retryTimer = null;
  let started = false;
  let current = { state: "connecting", info: {} };

  function emit(state, info) {
    current = { state: state, info: info || {} };
    stateListeners.forEach(function (listener) {
      listener(current.state, current.info);
    });
  }

  function topics() {
    return Object.keys(handlers);
  }

  function sendSubscribe(list) {
    if (socket && socket.readyState === WebSocket.OPEN && list.length) {
      socket.send(JSON.stringify({ type: "subscribe", topics: list }));
    }
  }

  function scheduleReconnect() {
    if (retryTimer) return;
    const delay = Math.min(MAX_DELAY_MS, 1000 * Math.pow(2, attempt)) * (0.75 + Math.random() * 0.5);
    attempt += 1;
    emit("reconnecting", { delayMs: delay });
    retryTimer = window.setTimeout(function () {
      retryTimer = null;
      connect();
    }, delay);
  }

  function connect() {
    const scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    live = false;
    emit(everLive ? "reconnecting" : "connecting", {});
    let opened;
    try {
      opened = new WebSocket(scheme + window.location.host + "/ws/events/");
    } catch (err) {
      scheduleReconnect();
      return;
    }
    socket = opened;
    opened.addEventListener("open", function () {
      sendSubscribe(topics());
    });
    opened.addEventListener("message", function (message) {
      let msg;
      try {
        msg = JSON.parse(message.data);
      } catch (err) {
        return;
      }
      if (msg.type === "subscribed") {
        if (!live) {
          live = true;
          attempt = 0;
          emit("live", { reconnected: everLive });
          everLive = true;
        }
      } else if (msg.type === "event" && msg.event) {
        (handlers[msg.event.topic] || []).forEach(function (handler) {
          handler(msg.event);
        });
      } else if (msg.type === "error") {
        emit("error", { message: msg.message || "" });
      }
    });
    opened.addEventListener("close", function () {
      if (socket === opened) socket = null;
      live = false;
      scheduleReconnect();
    });
  }

  function retryNow() {
    if (socket || !retryTimer) return;
    window.clearTimeout(retryTimer);
    retryTimer = null;
    attempt = 0;
    connect();
  }

  window.addEventListener("online", retryNow);
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible") retryNow();
  });

  function onState(listener) {
    stateListeners.push(listener);
    if (started) listener(current.state, current.info);
  }

  // Keep a page's live indicator ([data-live-indicator] with a [data-live-text] child) in step with
  // the socket; ``missed`` names what a reconnected page may have missed ("events", "changes" …).
  function bindIndicator(indicator, missed) {
    if (!indicator) return;
    const text = indicator.querySelector("[data-live-text]");
    onState(function (state, info) {
      indicator.dataset.state = state;
      if (!text) return;
      if (state === "live") {
        text.textContent = info.reconnected ? "Live (reload to see " + missed + " missed while offline)" : "Live";
      } else if (state === "reconnecting") {
        text.textContent = info.delayMs ? "Reconnecting in " + Math.round(info.delayMs / 1000) + "s…" : "Reconnecting…";
      } else if (state === "error") {
        text.textContent = "Live updates unavailable: " + info.message;
      } else {
        text.textContent = "Connecting…";
      }
    });
  }

  window.ToolgateSocket = {
    bindIndicator: bindIndicator,
    subscribe: function (topic, handler) {
      const known = Object.prototype.hasOwnProperty.call(handlers, topic);
      (handlers[topic] = handlers[topic] || []).push(handler);
      if (!started) {
        started = true;
        // After the page's scripts ran, so that one subscribe message carries all their topics.
        window.setTimeout(connect, 0);
      } else if (!known) {
        sendSubscribe([topic]);
      }
    },
    onState: onState,
  };
})();
