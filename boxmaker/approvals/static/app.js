"use strict";
// The approval page: log in with a passkey, then the pending calls, live
// (polled every 2 s), newest first.  Every text from brokerd is put in with
// textContent only: it was escaped as bxctl escapes it, and stays inert.
(() => {
  const shown = new Map();   // approval_id -> {node, deadline, done}
  let credential = null;     // the passkey that logged in: it signs approvals
  const el = (id) => document.getElementById(id);

  function show(section) {
    el("no-passkey").classList.toggle("hidden", section !== "no-passkey");
    el("login").classList.toggle("hidden", section !== "login");
    el("pending").classList.toggle("hidden", section !== "pending");
  }

  async function logIn() {
    try {
      const options = await bx.post("/api/login/options", {});
      const assertion = await bx.assertion(options.challenge, options.rp_id, options.allow_credentials);
      const answer = await bx.post("/api/login", {assertion});
      el("who").textContent = "logged in: " + answer.name;
      bx.say("");
      show("pending");
      await poll();
    } catch (error) {
      if (error.code === "no_passkey") { show("no-passkey"); return; }
      bx.say("login failed: " + bx.explain(error));
    }
  }

  function countdown(entry) {
    const left = Math.max(0, Math.round((entry.deadline - Date.now()) / 1000));
    const minutes = Math.floor(left / 60), seconds = left % 60;
    const text = left === 0 ? "expired" : "expires in " + minutes + "m" + String(seconds).padStart(2, "0") + "s";
    entry.node.querySelector(".countdown").textContent = text;
  }

  function settle(entry, text) {
    entry.done = true;
    entry.node.classList.add("answered");
    entry.node.querySelector(".outcome").textContent = text;
    for (const control of entry.node.querySelectorAll("button, input")) control.disabled = true;
  }

  function render(item) {
    const node = el("item-template").content.firstElementChild.cloneNode(true);
    node.dataset.approvalId = String(item.approval_id);
    node.querySelector(".tool").textContent = item.tool;
    node.querySelector(".id").textContent = String(item.approval_id) + " (call " + item.call + ")";
    node.querySelector(".grant").textContent = item.grant + " (ask)";
    node.querySelector(".session").textContent = item.session;
    node.querySelector(".taint").textContent = item.label + (item.untrusted ? " · untrusted" : " · trusted");
    const raised = node.querySelector(".raised");
    if (item.taint_raised_by.length) {
      raised.textContent = "raised by: " + item.taint_raised_by.map(
        (c) => c.tool + " → " + c.label + (c.untrusted ? " untrusted" : "") + " (record " + c.seq + ")").join("; ");
    }
    const width = Math.max(0, ...item.args.map((pair) => pair[0].length));
    node.querySelector(".args").textContent = item.args.length
      ? item.args.map((pair) => pair[0].padEnd(width) + "  " + pair[1]).join("\n")
      : "(no arguments)";
    const entry = {node, deadline: Date.now() + item.seconds_left * 1000, done: false, item};
    node.querySelector(".approve").addEventListener("click", () => approve(entry));
    node.querySelector(".refuse").addEventListener("click", () => refuse(entry));
    countdown(entry);
    return entry;
  }

  // An approval that is no longer pending: past its expiry (by brokerd's
  // count, sent as seconds_left) it expired; before, someone answered it.
  function gone(entry) {
    return Date.now() >= entry.deadline - 1000 ? "expired" : "answered elsewhere (bxctl or another page)";
  }

  async function approve(entry) {
    try {
      const assertion = await bx.assertion(entry.item.challenge, null, credential ? [credential] : null);
      await bx.post("/api/approve", {approval_id: entry.item.approval_id, assertion});
      settle(entry, "approved");
    } catch (error) {
      if (error.status === 409) settle(entry, gone(entry));
      else entry.node.querySelector(".outcome").textContent = "not approved: " + bx.explain(error);
    }
  }

  async function refuse(entry) {
    const reason = entry.node.querySelector(".reason").value;
    try {
      await bx.post("/api/refuse", {approval_id: entry.item.approval_id, reason: reason || null});
      settle(entry, "refused");
    } catch (error) {
      if (error.status === 409) settle(entry, gone(entry));
      else entry.node.querySelector(".outcome").textContent = "not refused: " + error.message;
    }
  }

  async function poll() {
    let answer;
    try {
      const response = await fetch("/api/pending", {credentials: "same-origin"});
      if (response.status === 401) { show("login"); return; }
      answer = await response.json();
      if (!response.ok) { bx.say(answer.error.message); return; }
    } catch (error) {
      bx.say("cannot reach the page's server: " + error.message);
      return;
    }
    bx.say("");
    credential = answer.credential;
    const live = new Set(answer.items.map((item) => item.approval_id));
    for (const [id, entry] of shown) {
      if (!live.has(id) && !entry.done) settle(entry, gone(entry));
    }
    // The server lists newest first, and every call not shown yet is newer
    // than those shown: the new ones go above them as a block, in its order.
    const list = el("items");
    const above = list.firstChild;
    for (const item of answer.items) {
      if (!shown.has(item.approval_id)) {
        const entry = render(item);
        shown.set(item.approval_id, entry);
        list.insertBefore(entry.node, above);
      }
    }
    el("empty").classList.toggle("hidden", live.size > 0);
  }

  // The first screen says at once when no passkey is enrolled (the login's
  // options answer no_passkey then), and what to run.
  async function anyEnrolled() {
    try {
      await bx.post("/api/login/options", {});
      return true;
    } catch (error) {
      return error.code !== "no_passkey";
    }
  }

  async function start() {
    el("login-button").addEventListener("click", logIn);
    const state = await bx.state();
    show(state.logged_in ? "pending" : await anyEnrolled() ? "login" : "no-passkey");
    if (state.logged_in) await poll();
    setInterval(() => { if (!el("pending").classList.contains("hidden")) poll(); }, 2000);
    setInterval(() => { for (const entry of shown.values()) if (!entry.done) countdown(entry); }, 1000);
  }
  start();
})();
