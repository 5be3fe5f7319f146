"use strict";
// The one-time link of `bxctl passkey add` / `remove`: #TOKEN in the fragment
// (never sent to any server in a request line or a Referer).
(() => {
  const token = location.hash.slice(1);
  const what = document.getElementById("what");
  const go = document.getElementById("go");
  async function run(options) {
    try {
      let assertion = null;
      if (options.assertion_challenge) {
        bx.say("first, confirm with a passkey that is already enrolled");
        assertion = await bx.assertion(options.assertion_challenge, options.rp_id, options.allow_credentials);
      }
      const body = {token, action: options.action, assertion, credential: null};
      if (options.action === "add") body.credential = await bx.create(options.creation);
      await bx.post("/api/enrol/finish", body);
      go.classList.add("hidden");
      bx.say(options.action === "add" ? "passkey enrolled: " + options.name : "passkey removed: " + options.name);
      document.getElementById("done").classList.remove("hidden");
    } catch (error) {
      bx.say("not done: " + bx.explain(error));
    }
  }
  async function start() {
    await bx.state();
    if (!/^[0-9a-f]{64}$/.test(token)) { what.textContent = "This link is not whole; copy it again."; return; }
    try {
      const options = await bx.post("/api/enrol/options", {token});
      what.textContent = options.action === "add"
        ? "Enrol a new passkey named “" + options.name + "” for approving boxmaker's calls."
        : "Remove the passkey named “" + options.name + "”.";
      go.textContent = options.action === "add" ? "Create passkey" : "Remove passkey";
      go.classList.remove("hidden");
      go.addEventListener("click", () => run(options));
    } catch (error) {
      what.textContent = "This link cannot be used: " + error.message;
    }
  }
  start();
})();
