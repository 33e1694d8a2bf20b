// MCP forms: the server form shows only the fields of the chosen transport (command, arguments and env
// for stdio; the URL for SSE and Streamable HTTP: [data-transport] lists them); in a tool picker,
// "All tools" and single tools exclude each other; the server chooser of "My access requests" opens the
// chosen server's form at once; "Test connection" and "Refresh tools" show that they are at work. Without
// this script every field shows and the server decides.
(function () {
  "use strict";

  const transport = document.querySelector("[data-mcp-server-form] [data-mcp-transport]");
  if (transport) {
    const apply = function () {
      document.querySelectorAll("[data-mcp-server-form] [data-transport]").forEach(function (input) {
        const field = input.closest(".field");
        // style, not the hidden attribute: the stylesheet sets .field's display.
        if (field) field.style.display = input.dataset.transport.split(" ").indexOf(transport.value) === -1 ? "none" : "";
      });
    };
    transport.addEventListener("change", apply);
    apply();
  }

  document.querySelectorAll("[data-tool-picker]").forEach(function (form) {
    const all = form.querySelector('input[name="all_tools"]');
    if (!all) return;
    const some = form.querySelectorAll('input[name="tool_allow"], input[name="extra_allow"]');
    const apply = function () {
      some.forEach(function (input) { input.disabled = all.checked; });
    };
    all.addEventListener("change", apply);
    apply();
  });

  const chooser = document.querySelector("[data-server-chooser]");
  if (chooser) {
    const select = chooser.querySelector("select");
    select.addEventListener("change", function () {
      if (select.value) chooser.submit();
    });
  }

  // Connecting to a server can take up to its timeout: a form marked data-busy shows that it is at work
  // and cannot be sent twice.
  document.querySelectorAll("form[data-busy]").forEach(function (form) {
    form.addEventListener("submit", function () {
      const button = form.querySelector('button[type="submit"]');
      if (!button) return;
      button.textContent = form.dataset.busy;
      window.setTimeout(function () { button.disabled = true; }, 0);
    });
  });
})();
