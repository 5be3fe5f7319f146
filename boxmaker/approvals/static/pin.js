"use strict";
// The one-time link of `bxctl mcp pin` under require_passkey: #TOKEN in the
// fragment (never sent in a request line or a Referer).  The probe's rows come
// escaped from the page's server (bxctl's own rows) and go in with textContent
// only; the passkey signs brokerd's challenge of exactly this pin.
(() => {
  const token = location.hash.slice(1);
  const el = (id) => document.getElementById(id);
  function rows(view) {
    const probe = el("probe");
    probe.textContent = "";
    for (const [head, value] of view.rows) {
      const line = document.createElement("span");
      line.className = "row";
      line.textContent = head;
      if (value !== null) {
        const said = document.createElement("span");
        said.className = "said";
        said.textContent = value;
        line.appendChild(said);
      }
      probe.appendChild(line);
      probe.appendChild(document.createTextNode("\n"));
    }
    probe.classList.remove("hidden");
    if (view.invalidates.length) {
      el("lost").textContent = view.invalidates.map((pair) => pair[0] + "  (" + pair[1] + ")").join("\n");
      el("invalidates").classList.remove("hidden");
    }
  }
  async function sign(view) {
    const go = el("go");
    go.disabled = true;
    try {
      bx.say("sign with your passkey");
      const assertion = await bx.assertion(view.challenge, view.rp_id, view.allow_credentials);
      const done = await bx.post("/api/pin/finish", {token, assertion});
      go.classList.add("hidden");
      bx.say("pinned: " + done.server + " " + done.digest);
    } catch (error) {
      go.disabled = false;
      bx.say("not pinned: " + bx.explain(error));
    }
  }
  async function start() {
    await bx.state();
    if (!/^[0-9a-f]{64}$/.test(token)) { el("what").textContent = "This link is not whole; copy it again."; return; }
    try {
      const view = await bx.post("/api/pin/options", {token});
      el("what").textContent = "Pin the MCP server " + view.server + " as its " + view.tools +
        " tools below. Its tools are offered to the model exactly as listed here.";
      el("digest").textContent = "digest " + view.digest;
      el("digest").classList.remove("hidden");
      const minutes = Math.round(view.seconds_left / 60);
      el("expires").textContent = "link good for about " + minutes + " min";
      rows(view);
      const go = el("go");
      go.classList.remove("hidden");
      go.addEventListener("click", () => sign(view));
    } catch (error) {
      el("what").textContent = "This link cannot be used: " + error.message;
    }
  }
  start();
})();
