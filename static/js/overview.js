// The Overview (templates/dashboard/home.html): reads the aggregate endpoints (/api/v1/stats/...) with
// the session, draws the charts with uPlot (static/vendor/uplot), fills the "needs you" strip, and reads
// them again after a live event of the page's topics, at most once every few seconds. Each chart has a
// text summary and a data table for screen readers. The range switch changes the range in place (and in
// the address, so a reload keeps it). Values only ever become text, never markup.
(function () {
  "use strict";

  const holder = document.getElementById("overview-config");
  if (!holder) return;
  const config = JSON.parse(holder.textContent);
  const THROTTLE_MS = 3000;
  const COLORS = { ok: "#137333", error: "#b42318", denied: "#8a5a00", refused: "#5b6675", p50: "#2952cc", p95: "#7a2fb8" };
  const OUTCOMES = ["ok", "error", "denied", "refused"];
  let range = config.range;
  let charts = {};
  let loading = false;
  let again = false;
  let lastLoad = 0;
  let timer = null;

  const statusNode = document.querySelector("[data-overview-status]");

  function text(tag, value, className) {
    const node = document.createElement(tag);
    node.textContent = value;
    if (className) node.className = className;
    return node;
  }

  function getJSON(url) {
    return fetch(url + "?range=" + encodeURIComponent(range), {
      credentials: "same-origin",
      headers: { Accept: "application/json" },
    }).then(function (response) {
      if (!response.ok) throw new Error("HTTP " + response.status);
      return response.json();
    });
  }

  // A bucket's start in the browser's local time, as the charts' axes show it.
  function label(iso, bucketSeconds) {
    const when = new Date(iso);
    const pad = function (n) { return String(n).padStart(2, "0"); };
    const clock = pad(when.getHours()) + ":" + pad(when.getMinutes());
    return bucketSeconds >= 3600 * 6 ? pad(when.getMonth() + 1) + "-" + pad(when.getDate()) + " " + clock : clock;
  }

  function fmt(value, digits) {
    if (value === null || value === undefined) return "–";
    return Number(value).toFixed(digits === undefined ? 1 : digits);
  }

  function table(columns, rows) {
    const node = document.createElement("table");
    node.className = "table compact";
    const head = node.createTHead().insertRow();
    columns.forEach(function (column) {
      const th = document.createElement("th");
      th.scope = "col";
      th.textContent = column;
      head.appendChild(th);
    });
    const body = node.createTBody();
    rows.forEach(function (cells) {
      const row = body.insertRow();
      cells.forEach(function (cell) {
        row.insertCell().textContent = cell;
      });
    });
    return node;
  }

  function draw(name, series, data, yLabel) {
    const figure = document.querySelector('[data-chart="' + name + '"]');
    const canvas = figure.querySelector(".chart-canvas");
    if (charts[name]) {
      charts[name].destroy();
      delete charts[name];
    }
    if (!window.uPlot) return;
    const width = Math.max(160, canvas.clientWidth || 320);
    charts[name] = new window.uPlot(
      {
        width: width,
        height: 180,
        legend: { show: true },
        scales: { x: { time: true }, y: { range: function (u, min, max) { return [0, Math.max(1, max || 0)]; } } },
        axes: [{}, { label: yLabel, size: 50 }],
        // Points as well as lines: a value alone in its range (one busy minute) still shows.
        series: [{}].concat(series.map(function (one) {
          return Object.assign({ points: { show: true, size: 5 } }, one);
        })),
      },
      data,
      canvas
    );
  }

  function showSeries(body) {
    const buckets = body.buckets;
    const xs = buckets.map(function (b) { return new Date(b.start).getTime() / 1000; });
    const nonEmpty = buckets.filter(function (b) { return b.total > 0; });
    const sums = { total: 0, ok: 0, error: 0, denied: 0, refused: 0 };
    buckets.forEach(function (b) {
      Object.keys(sums).forEach(function (key) { sums[key] += b[key]; });
    });

    draw(
      "calls",
      OUTCOMES.map(function (o) { return { label: o, stroke: COLORS[o], width: 2 }; }),
      [xs].concat(OUTCOMES.map(function (o) { return buckets.map(function (b) { return b[o]; }); })),
      "calls"
    );
    const calls = document.querySelector('[data-chart="calls"]');
    calls.querySelector("[data-summary]").textContent =
      sums.total + " call" + (sums.total === 1 ? "" : "s") + " in the last " + body.range + ": " +
      sums.ok + " ok, " + sums.error + " failed, " + sums.denied + " denied, " + sums.refused + " refused.";
    calls.dataset.total = String(sums.total);
    fillTable(calls, ["Bucket (local time)", "Total", "OK", "Failed", "Denied", "Refused"], nonEmpty.map(function (b) {
      return [label(b.start, body.bucket_seconds), b.total, b.ok, b.error, b.denied, b.refused];
    }));

    draw(
      "latency",
      [
        { label: "p50", stroke: COLORS.p50, width: 2, spanGaps: false },
        { label: "p95", stroke: COLORS.p95, width: 2, spanGaps: false },
      ],
      [xs, buckets.map(function (b) { return b.p50_ms; }), buckets.map(function (b) { return b.p95_ms; })],
      "ms"
    );
    const p95s = nonEmpty.map(function (b) { return b.p95_ms; }).filter(function (v) { return v !== null; });
    document.querySelector('[data-chart="latency"] [data-summary]').textContent = p95s.length
      ? "Highest p95 latency: " + fmt(Math.max.apply(null, p95s)) + " ms."
      : "No call ran in this range.";
    fillTable(document.querySelector('[data-chart="latency"]'), ["Bucket (local time)", "p50 (ms)", "p95 (ms)"],
      nonEmpty.map(function (b) { return [label(b.start, body.bucket_seconds), fmt(b.p50_ms), fmt(b.p95_ms)]; }));

    draw(
      "errors",
      [{ label: "error rate", stroke: COLORS.error, width: 2, spanGaps: false }],
      [xs, buckets.map(function (b) { return b.error_rate === null ? null : b.error_rate * 100; })],
      "%"
    );
    document.querySelector('[data-chart="errors"] [data-summary]').textContent = sums.total
      ? "Error rate over the range: " + fmt((sums.error / sums.total) * 100) + "% (" + sums.error + " of " + sums.total + " calls failed)."
      : "No calls in this range.";
    fillTable(document.querySelector('[data-chart="errors"]'), ["Bucket (local time)", "Error rate (%)"],
      nonEmpty.map(function (b) { return [label(b.start, body.bucket_seconds), fmt(b.error_rate * 100)]; }));
  }

  function fillTable(figure, columns, rows) {
    const holderNode = figure.querySelector("[data-table]");
    holderNode.replaceChildren(rows.length ? table(columns, rows) : text("p", "No calls in this range.", "muted"));
  }

  function showTop(body) {
    ["tools", "agents"].forEach(function (kind) {
      const target = document.querySelector('[data-top="' + kind + '"] [data-top-body]');
      const rows = body[kind];
      if (!rows.length) {
        target.replaceChildren(text("p", "No calls in this range.", "muted"));
        return;
      }
      const most = rows[0].calls || 1;
      const list = document.createElement("ol");
      list.className = "top-list";
      rows.forEach(function (row) {
        const item = document.createElement("li");
        item.appendChild(text("code", row.name, "top-name"));
        const bar = document.createElement("span");
        bar.className = "top-bar";
        bar.setAttribute("aria-hidden", "true");
        bar.style.width = Math.max(2, Math.round((row.calls / most) * 100)) + "%";
        item.appendChild(bar);
        item.appendChild(text("span", row.calls + " call" + (row.calls === 1 ? "" : "s") +
          (row.failed ? ", " + row.failed + " failed" : ""), "top-count"));
        list.appendChild(item);
      });
      target.replaceChildren(list);
    });
  }

  function timeLeft(seconds) {
    if (seconds === null || seconds === undefined) return "";
    if (seconds < 60) return "first expires in " + seconds + " s";
    if (seconds < 3600) return "first expires in " + Math.round(seconds / 60) + " min";
    return "first expires in " + Math.round(seconds / 3600) + " h";
  }

  function showNeeds(body) {
    document.querySelectorAll("[data-need]").forEach(function (item) {
      const key = item.dataset.need;
      let value = body[key];
      const detail = item.querySelector("[data-need-detail]");
      if (key === "approvals_waiting") {
        if (detail) detail.textContent = value.count ? timeLeft(value.seconds_left) : "";
        value = value.count;
      }
      const li = item.closest("li");
      if (value === null || value === undefined) {
        li.hidden = true;
        return;
      }
      li.hidden = false;
      item.querySelector("[data-need-value]").textContent = String(value);
      item.classList.toggle("need-active", value > 0);
    });
    document.querySelectorAll("[data-range-label]").forEach(function (node) {
      node.textContent = "(last " + body.range + ")";
    });
  }

  function load() {
    if (loading) {
      again = true;
      return;
    }
    loading = true;
    lastLoad = Date.now();
    const urls = config.urls;
    Promise.all([getJSON(urls.series), getJSON(urls.top), getJSON(urls.needs)])
      .then(function (bodies) {
        showSeries(bodies[0]);
        showTop(bodies[1]);
        showNeeds(bodies[2]);
        const now = new Date();
        const when = [now.getHours(), now.getMinutes(), now.getSeconds()].map(function (n) {
          return String(n).padStart(2, "0");
        }).join(":");
        statusNode.textContent = "Last " + range + (config.own ? ", your own calls" : "") + ". Updated " + when + " (local time).";
        document.querySelector("[data-overview-needs]").dataset.loaded = "true";
        document.querySelector(".overview-charts").dataset.loadedRange = range;
      })
      .catch(function (err) {
        statusNode.textContent = "Could not load the figures (" + err.message + "). They load again on the next update.";
      })
      .finally(function () {
        loading = false;
        if (again) {
          again = false;
          schedule();
        }
      });
  }

  // At most one load every THROTTLE_MS: an event inside the window loads once when it ends.
  function schedule() {
    if (timer) return;
    const wait = Math.max(0, lastLoad + THROTTLE_MS - Date.now());
    timer = window.setTimeout(function () {
      timer = null;
      load();
    }, wait);
  }

  document.querySelectorAll("[data-range]").forEach(function (link) {
    link.addEventListener("click", function (event) {
      event.preventDefault();
      range = link.dataset.range;
      document.querySelectorAll("[data-range]").forEach(function (other) {
        if (other === link) other.setAttribute("aria-current", "true");
        else other.removeAttribute("aria-current");
      });
      if (window.history && window.history.replaceState) window.history.replaceState(null, "", "?range=" + range);
      load();
    });
  });

  let resizeTimer = null;
  window.addEventListener("resize", function () {
    window.clearTimeout(resizeTimer);
    resizeTimer = window.setTimeout(function () {
      Object.keys(charts).forEach(function (name) {
        const canvas = document.querySelector('[data-chart="' + name + '"] .chart-canvas');
        charts[name].setSize({ width: Math.max(160, canvas.clientWidth), height: 180 });
      });
    }, 200);
  });

  const socket = window.ToolgateSocket;
  const indicator = document.querySelector("[data-live-indicator]");
  if (!config.topics.length && indicator) {
    indicator.dataset.state = "off";
    indicator.querySelector("[data-live-text]").textContent = "No live updates for your role";
  } else if (socket) {
    socket.bindIndicator(indicator, "updates");
    config.topics.forEach(function (topic) {
      socket.subscribe(topic, schedule);
    });
    socket.onState(function (state, info) {
      if (state === "live" && info.reconnected) schedule();
    });
  }
  load();
})();
