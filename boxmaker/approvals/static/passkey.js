"use strict";
// Shared by the approval page and the enrolment page: base64url, the CSRF'd
// POST, and the two WebAuthn ceremonies in the shapes brokerd expects.
const bx = (() => {
  function fromB64url(text) {
    const padded = text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4);
    const raw = atob(padded);
    const out = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
    return out.buffer;
  }
  function toB64url(buffer) {
    const bytes = new Uint8Array(buffer);
    let raw = "";
    for (let i = 0; i < bytes.length; i++) raw += String.fromCharCode(bytes[i]);
    return btoa(raw).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }
  let csrf = null;
  async function state() {
    const answer = await fetch("/api/state", {credentials: "same-origin"});
    const value = await answer.json();
    csrf = value.csrf;
    return value;
  }
  async function post(path, body) {
    const answer = await fetch(path, {
      method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf || ""},
      body: JSON.stringify(body),
    });
    const value = await answer.json();
    if (!answer.ok) {
      const error = new Error(value.error ? value.error.message : "HTTP " + answer.status);
      error.code = value.error ? value.error.code : "http";
      error.status = answer.status;
      throw error;
    }
    if (value.csrf) csrf = value.csrf;
    return value;
  }
  async function assertion(challenge, rpId, allow) {
    const publicKey = {
      challenge: fromB64url(challenge), userVerification: "required", timeout: 120000,
      allowCredentials: (allow || []).map((id) => ({type: "public-key", id: fromB64url(id)})),
    };
    if (rpId) publicKey.rpId = rpId;
    const credential = await navigator.credentials.get({publicKey});
    const r = credential.response;
    return {
      credential_id: toB64url(credential.rawId),
      authenticator_data: toB64url(r.authenticatorData),
      client_data_json: toB64url(r.clientDataJSON),
      signature: toB64url(r.signature),
      user_handle: r.userHandle ? toB64url(r.userHandle) : null,
    };
  }
  async function create(options) {
    const o = options;
    const publicKey = {
      rp: o.rp, challenge: fromB64url(o.challenge),
      user: {id: fromB64url(o.user.id), name: o.user.name, displayName: o.user.displayName},
      pubKeyCredParams: o.pubKeyCredParams, timeout: o.timeout || 120000,
      excludeCredentials: (o.excludeCredentials || []).map((c) => ({type: c.type, id: fromB64url(c.id)})),
      authenticatorSelection: o.authenticatorSelection, attestation: o.attestation || "none",
    };
    const credential = await navigator.credentials.create({publicKey});
    return {
      id: credential.id, rawId: toB64url(credential.rawId), type: credential.type,
      response: {
        clientDataJSON: toB64url(credential.response.clientDataJSON),
        attestationObject: toB64url(credential.response.attestationObject),
      },
    };
  }
  function say(text) { document.getElementById("status").textContent = text; }
  // What the browser's WebAuthn errors mean here, in words (never the raw text).
  function explain(error) {
    if (error && error.name === "NotAllowedError") {
      return "this browser has no passkey for this page, or you cancelled, or it timed out. " +
        "To enrol one here, run `bxctl passkey add --name NAME` on the box and open its link in this browser.";
    }
    if (error && error.name === "InvalidStateError") {
      return "this authenticator already holds a passkey for boxmaker (bxctl passkey list).";
    }
    if (error && error.name === "SecurityError") {
      return "the browser refused passkeys on this address: open the page at its configured origin " +
        "(a DNS name with a certificate it trusts, or http://localhost).";
    }
    return error && error.message ? error.message : String(error);
  }
  return {state, post, assertion, create, say, explain};
})();
