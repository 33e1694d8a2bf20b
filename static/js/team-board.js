// A team's live board and task page: task events on the team's topic ("team:<id>") move cards between
// the status columns, add new ones and take deleted ones away; escalations appear in the board's "Open
// escalations" list and mark their card. On a task's page an event of that task shows a notice. The
// page's one socket is live-socket.js's. Cards mirror templates/dashboard/teams/_card.html and are
// built with textContent only, so event data can never inject markup.
(function () {
  "use strict";

  const socket = window.ToolgateSocket;
  const configNode = document.getElementById("team-board-config");
  if (!socket || !configNode) return;
  const config = JSON.parse(configNode.textContent || "{}");
  const PLACEHOLDER = "00000000-0000-0000-0000-000000000000";
  const FINISHED = ["completed", "failed", "cancelled"];
  const STATUS_LABELS = {
    pending: "Pending", in_progress: "In progress", in_review: "In review", blocked: "Blocked",
    completed: "Completed", failed: "Failed", cancelled: "Cancelled", stale: "Stale",
  };

  function el(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = text;
    if (className) node.className = className;
    return node;
  }

  function taskUrl(id) {
    return config.task_url.replace(PLACEHOLDER, id);
  }

  socket.bindIndicator(document.querySelector("[data-live-indicator]"), "changes");

  function isTaskEvent(event) {
    const data = event.data || {};
    return event.type.indexOf("task.") === 0 && typeof data.id === "string" && typeof data.status === "string"
      && typeof data.identifier === "string";
  }

  // --- the board ---------------------------------------------------------------------------------------
  const board = document.querySelector("[data-team-board]");
  const escalationList = document.querySelector("[data-escalation-list]");
  const escalationEmpty = document.querySelector("[data-escalation-empty]");

  function cardOf(id) {
    return board.querySelector('li.task-card[data-task="' + CSS.escape(id) + '"]');
  }

  function columnOf(status) {
    return board.querySelector('section[data-column="' + CSS.escape(status) + '"]');
  }

  function addToCount(column, delta) {
    const count = column.querySelector("[data-count]");
    count.textContent = String(Math.max(0, (parseInt(count.textContent, 10) || 0) + delta));
  }

  function identifierOf(id) {
    const card = cardOf(id);
    return card ? card.dataset.identifier : null;
  }

  function buildCard(data, escalated) {
    const card = el("li", null, "task-card");
    card.dataset.task = data.id;
    card.dataset.priority = String(data.priority || 0);
    card.dataset.identifier = data.identifier;
    const top = el("div", null, "card-top");
    const link = el("a", data.identifier, "identifier mono small");
    link.href = taskUrl(data.id);
    const priority = el("span", "P" + (data.priority || 0), "priority small muted");
    priority.title = "Priority";
    top.append(link, priority);
    card.append(top, el("span", data.subject, "subject"));
    const meta = el("div", null, "meta");
    meta.append(el("span", data.owner || "unassigned", "owner"));
    const unknown = [];
    (data.blocked_by || []).forEach(function (blocker) {
      const identifier = identifierOf(blocker);
      if (identifier) {
        const mark = el("span", "Waits on " + identifier, "mark mark-waits");
        mark.dataset.mark = "waits";
        meta.append(" ", mark);
      } else {
        unknown.push(blocker);
      }
    });
    if (unknown.length) {
      const mark = el("span", "Waits on " + unknown.length + " task" + (unknown.length > 1 ? "s" : ""), "mark mark-waits");
      mark.dataset.mark = "waits";
      meta.append(" ", mark);
    }
    if (escalated) meta.append(" ", blockerMark());
    card.append(meta);
    if (data.progress_percent !== null && data.progress_percent !== undefined) {
      const bar = el("div", null, "progress");
      bar.setAttribute("role", "progressbar");
      bar.setAttribute("aria-label", "Progress");
      bar.setAttribute("aria-valuemin", "0");
      bar.setAttribute("aria-valuemax", "100");
      bar.setAttribute("aria-valuenow", String(data.progress_percent));
      const fill = el("span");
      fill.style.width = Math.max(0, Math.min(100, Number(data.progress_percent) || 0)) + "%";
      bar.append(fill);
      card.append(bar);
    }
    return card;
  }

  function blockerMark() {
    const mark = el("span", "Blocker", "mark mark-blocker");
    mark.dataset.mark = "blocker";
    return mark;
  }

  function insert(list, card, status) {
    if (FINISHED.indexOf(status) >= 0) {
      list.insertBefore(card, list.firstChild);
      return;
    }
    const priority = parseInt(card.dataset.priority, 10) || 0;
    const after = Array.prototype.find.call(list.children, function (other) {
      return (parseInt(other.dataset.priority, 10) || 0) < priority;
    });
    list.insertBefore(card, after || null);
  }

  function removeCard(card) {
    const column = card.closest("section[data-column]");
    card.remove();
    if (column) addToCount(column, -1);
  }

  function onTask(event) {
    const data = event.data;
    const existing = cardOf(data.id);
    if (event.type === "task.deleted" || (config.chat && data.chat_id !== config.chat)) {
      if (existing) removeCard(existing);
      return;
    }
    const column = columnOf(data.status);
    if (!column) return;
    let escalated = !!(existing && existing.querySelector('[data-mark="blocker"]'));
    if (event.type === "task.retried") {
      escalated = false;
      dropEscalations(function (item) { return item.dataset.task === data.id; });
    }
    const card = buildCard(data, escalated);
    if (existing) removeCard(existing);
    insert(column.querySelector("ol[data-cards]"), card, data.status);
    addToCount(column, 1);
    card.classList.add("is-new");
  }

  function dropEscalations(matches) {
    if (!escalationList) return;
    Array.prototype.slice.call(escalationList.children).forEach(function (item) {
      if (matches(item)) item.remove();
    });
    if (escalationEmpty) escalationEmpty.hidden = escalationList.children.length > 0;
  }

  function onEscalation(event) {
    const data = event.data || {};
    if (event.type === "escalation.created" && data.task && escalationList) {
      if (config.chat && data.task.chat_id !== config.chat) return;
      if (escalationList.querySelector('li[data-escalation="' + CSS.escape(data.id) + '"]')) return;
      const item = el("li");
      item.dataset.escalation = data.id;
      item.dataset.task = data.task.id;
      const link = el("a", data.task.identifier);
      link.href = taskUrl(data.task.id);
      item.append(link, " — ", el("code", data.member || "?"), ": ", el("span", data.blocker, "blocker"));
      escalationList.insertBefore(item, escalationList.firstChild);
      if (escalationEmpty) escalationEmpty.hidden = true;
      const card = cardOf(data.task.id);
      if (card && !card.querySelector('[data-mark="blocker"]')) {
        card.querySelector(".meta").append(" ", blockerMark());
      }
    } else if (event.type === "escalation.resolved") {
      dropEscalations(function (item) { return item.dataset.escalation === data.id; });
      const stillOpen = escalationList && escalationList.querySelector('li[data-task="' + CSS.escape(data.task || "") + '"]');
      const card = data.task ? cardOf(data.task) : null;
      const mark = card && card.querySelector('[data-mark="blocker"]');
      if (mark && !stillOpen) mark.remove();
    }
  }

  // --- a task's page -------------------------------------------------------------------------------------
  const changed = document.querySelector("[data-task-changed]");
  const statusBadge = document.querySelector("[data-task-status]");

  function onThisTask(event) {
    if (event.data.id !== config.task || !changed) return;
    changed.querySelector("[data-task-changed-text]").textContent =
      event.type.slice(5).replace(/_/g, " ") + " (now " + (STATUS_LABELS[event.data.status] || event.data.status).toLowerCase() + ").";
    changed.hidden = false;
    if (statusBadge) {
      statusBadge.textContent = STATUS_LABELS[event.data.status] || event.data.status;
      statusBadge.className = "badge status-" + event.data.status;
    }
  }

  socket.subscribe(config.topic, function (event) {
    if (board) {
      if (isTaskEvent(event)) onTask(event);
      else if (event.type.indexOf("escalation.") === 0) onEscalation(event);
    } else if (config.task && isTaskEvent(event)) {
      onThisTask(event);
    }
  });
})();
