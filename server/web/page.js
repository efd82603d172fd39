// The waiting page's script: it follows the server's poll hint, keeps the
// progress bar's starting point for this tab, counts the entry down and
// places the order. Without it the page still works (meta refresh).
(function () {
  "use strict";

  var boot = JSON.parse(document.getElementById("boot").textContent);
  // The page's language: its messages (only those this script writes) come
  // in a JSON element, its plural rules and digits from the browser
  // (grouped always, as the server writes them: "2.501" in Spanish too).
  var messages = JSON.parse(document.getElementById("messages").textContent) || {};
  var lang = document.documentElement.lang || "en";
  var plurals = new Intl.PluralRules(lang), numbers = new Intl.NumberFormat(lang, { useGrouping: "always" });
  var sections = ["join", "waiting", "scheduled", "admitted", "ordered", "sold_out", "already_ordered", "expired", "left",
    "queue_full", "closed", "invitation", "no_room", "unavailable", "error"];
  var fromKey = "waitroom:" + boot.room + ":from";
  var pollTimer = 0, clockTimer = 0, failures = 0;
  var token = "", deadline = 0;
  // What the polite region last said, and whether "your turn" was said:
  // a screen reader hears a change, not every poll.
  var announced = "", turnTold = false;

  function $(id) { return document.getElementById(id); }

  // The section the keyboard was last in (a disabled button drops the
  // focus itself, so the one in it now is not enough).
  var focusIn = null;
  document.addEventListener("focusin", function (e) { focusIn = e.target.closest ? e.target.closest("section") : null; });

  function show(state) {
    sections.forEach(function (s) { $(s).hidden = s !== state; });
    if (focusIn && focusIn.hidden && (document.activeElement === document.body || focusIn.contains(document.activeElement))) {
      // The keyboard was in a section now hidden (the order button, say):
      // it goes on to the new one's heading rather than to nowhere.
      var heading = $(state).querySelector("h1");
      heading.tabIndex = -1;
      heading.focus();
    }
    document.body.setAttribute("data-state", state);
    if (state !== "waiting") { clearTimeout(pollTimer); }
    if (state !== "admitted") { clearTimeout(clockTimer); }
    if (state !== "waiting" && state !== "admitted") {
      setTitle(t("page.name"));
      remember(0);
    }
  }

  // sessionStorage is per tab and survives reloads: the bar starts where
  // this tab joined. Storage may be off (private modes); the bar then
  // starts at the current place.
  function remembered() {
    try { return parseInt(sessionStorage.getItem(fromKey), 10) || 0; } catch (e) { return 0; }
  }
  function remember(from) {
    try {
      if (from > 0) { sessionStorage.setItem(fromKey, String(from)); } else { sessionStorage.removeItem(fromKey); }
    } catch (e) { /* storage off: nothing to keep */ }
  }

  // The tab's title says the shop too, when the room names one.
  function setTitle(text) { document.title = boot.shop_name ? text + " · " + boot.shop_name : text; }

  function digits(n) { return numbers.format(n); }

  // t fills in a message's {{.Name}} placeholders from data; a plural
  // message picks its form by the count data.N, written in digits.
  function t(key, data) {
    var m = messages[key], args = {};
    data = data || {};
    Object.keys(data).forEach(function (k) { args[k] = typeof data[k] === "number" ? digits(data[k]) : data[k]; });
    if (m && typeof m === "object") { m = m[plurals.select(data.N)] || m.other; }
    return String(m || key).replace(/\{\{\.(\w+)\}\}/g, function (_, k) { return k in args ? args[k] : ""; });
  }

  // The same words as the server's waitText (page.go).
  function waitText(eta, low, high) {
    if (high < 60) { return t("wait.under_minute"); }
    var lo = Math.max(Math.floor((low + 30) / 60), 1), hi = Math.max(Math.floor((high + 30) / 60), 1);
    if (eta < 3600) {
      return lo >= hi ? t("wait.minutes", { N: hi }) : t("wait.range", { Low: lo, High: hi });
    }
    var minutes = Math.floor((eta + 30) / 60);
    var h = Math.floor(minutes / 60), m = minutes % 60;
    return m === 0 ? t("wait.hours", { H: h }) : t("wait.hours_minutes", { H: h, M: m });
  }

  function clockText(ms) {
    var secs = Math.max(0, Math.floor(ms / 1000));
    var s = secs % 60;
    return Math.floor(secs / 60) + ":" + (s < 10 ? "0" : "") + s;
  }

  // renderWaiting shows a place; quiet: the page as loaded shows it
  // already, so the live region says nothing until it changes.
  function renderWaiting(st, quiet) {
    var from = remembered();
    if (!from || st.position > from) {
      // A first visit, or a place further back than the one remembered
      // (this visitor joined again): start the bar here.
      from = st.position;
      remember(from);
    }
    var pct = from > 1 ? Math.floor((from - st.position) * 100 / (from - 1)) : (st.position <= 1 ? 100 : 0);
    $("position").textContent = digits(st.position);
    $("ahead").textContent = digits(st.ahead);
    var wait = st.paused ? t("waiting.on_hold") : waitText(st.eta_seconds, st.eta_low_seconds, st.eta_high_seconds);
    $("wait").textContent = wait;
    var say = t("waiting.announce", { Position: st.position, Wait: wait });
    if (say !== announced && !quiet) { $("announce").textContent = say; }
    announced = say;
    $("progress").value = pct;
    $("progress").setAttribute("aria-valuenow", String(pct));
    $("progress").textContent = pct + "%";
    $("progress-text").textContent = !st.ahead ? t("waiting.next") : t("waiting.progress", { Percent: pct });
    var few = typeof st.units_left === "number";
    $("units").hidden = !few;
    if (few) {
      $("units-left").textContent = t("waiting.units_left", { N: st.units_left });
      $("units-ahead").textContent = t("waiting.units_ahead", { N: st.ahead });
    }
    $("paused").hidden = !st.paused;
    setTitle(t("page.title_waiting", { Position: st.position }));
    show("waiting");
    clearTimeout(pollTimer);
    pollTimer = setTimeout(poll, Math.max(1000, st.poll_after_ms || 1000));
  }

  // An early arrival: a countdown to the opening, and a poll at the moment
  // the server's hint gives (spread over the seconds after the opening).
  var opensAt = 0;
  function renderScheduled(st) {
    opensAt = Date.now() + (st.opens_in_ms || 0);
    var drawn = st.prequeue_order !== "fifo";
    $("drawn").hidden = !drawn;
    $("by-arrival").hidden = drawn;
    if (!drawn) { $("by-arrival").textContent = t("scheduled.by_arrival", { Position: st.position }); }
    show("scheduled");
    setTitle(t("page.title_scheduled"));
    countdown();
    clearTimeout(pollTimer);
    pollTimer = setTimeout(poll, Math.max(1000, st.poll_after_ms || 1000));
  }
  function countdown() {
    var secs = Math.max(0, Math.floor((opensAt - Date.now()) / 1000));
    var m = Math.floor(secs / 60) % 60, s = secs % 60;
    $("opens-in").textContent = Math.floor(secs / 3600) + ":" + (m < 10 ? "0" : "") + m + ":" + (s < 10 ? "0" : "") + s;
    clearTimeout(clockTimer);
    if (secs > 0) { clockTimer = setTimeout(countdown, 1000); }
  }

  function renderAdmitted(st) {
    token = st.token;
    deadline = Date.now() + st.expires_in_ms;
    remember(0);
    setTitle(t("page.title_admitted"));
    show("admitted");
    var button = $("order");
    if (button) { button.hidden = false; button.disabled = false; }
    if (!turnTold) {
      // Once: the turn is said assertively and the keyboard is put on
      // the order: the button, else the link on to the shop, else the
      // heading.
      turnTold = true;
      $("alert").textContent = t("admitted.announce");
      (button || $("shop-link") || $("admitted-title")).focus();
    }
    tick();
  }

  // The page shows "your turn": asking once more confirms the token, so it
  // lives its whole TTL instead of expiring as a no-show.
  function confirm() {
    fetch(boot.status_url, { headers: { "Accept": "application/json" }, cache: "no-store", credentials: "same-origin" })
      .then(read)
      .then(function (r) {
        if (r.status === 200 && r.body.state === "admitted") { deadline = Date.now() + r.body.expires_in_ms; }
      }, function () {});
  }

  function tick() {
    var left = deadline - Date.now();
    if (left <= 0) { show("expired"); return; }
    $("time-left").textContent = clockText(left);
    // Wake at the next whole second of the countdown.
    clockTimer = setTimeout(tick, (left % 1000) || 1000);
  }

  function read(res) {
    return res.json().catch(function () { return {}; }).then(function (body) {
      return { status: res.status, body: body || {}, retryAfter: parseInt(res.headers.get("Retry-After"), 10) || 0 };
    });
  }
  function codeOf(body) { return (body && body.error && body.error.code) || ""; }
  // A refusal is told in the buyer's words, by its code: the API's own
  // message is written for the shop's developers.
  var invitations = { INVITE_ONLY: "invitation.invite_only", PASS_INVALID: "invitation.pass_invalid", PASS_USED_UP: "invitation.pass_used_up" };

  function poll() {
    fetch(boot.status_url, { headers: { "Accept": "application/json" }, cache: "no-store", credentials: "same-origin" })
      .then(read)
      .then(function (r) {
        var code = codeOf(r.body);
        if (r.status === 200 && r.body.state === "waiting") {
          failures = 0;
          $("trouble").hidden = true;
          renderWaiting(r.body);
        } else if (r.status === 200 && r.body.state === "admitted") {
          renderAdmitted(r.body);
          confirm();
        } else if (r.status === 200 && r.body.state === "scheduled") {
          failures = 0;
          renderScheduled(r.body);
        } else if (r.status === 200 && r.body.state === "sold_out") {
          show("sold_out");
        } else if (code === "ALREADY_ORDERED") {
          show("already_ordered");
        } else if (code === "NOT_IN_QUEUE") {
          show("left");
        } else if (code === "ROOM_NOT_FOUND") {
          show("no_room");
        } else {
          trouble();
        }
      }, trouble);
  }

  // A failing poll backs off (with jitter, so a recovering server is not
  // met by the whole crowd at once) and keeps the last known state.
  function trouble() {
    failures++;
    $("trouble").hidden = false;
    var delay = Math.min(30000, 1000 * Math.pow(2, failures)) * (0.75 + Math.random() / 2);
    clearTimeout(pollTimer);
    pollTimer = setTimeout(poll, delay);
  }

  function orderNote(text, retryAfterMs) {
    var note = $("order-note"), button = $("order");
    note.textContent = text;
    note.hidden = false;
    if (retryAfterMs > 0) {
      button.disabled = true;
      setTimeout(function () { button.disabled = false; }, retryAfterMs);
    } else {
      button.disabled = false;
    }
  }

  function order() {
    var button = $("order");
    button.disabled = true;
    $("order-note").hidden = true;
    fetch(boot.order_url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "Accept": "application/json", "X-Entry-Token": token },
      body: JSON.stringify({ product_id: boot.product_id, quantity: 1 })
    })
      .then(read)
      .then(function (r) {
        var code = codeOf(r.body);
        if (r.status === 200 || r.status === 201) {
          $("order-id").textContent = r.body.id || "";
          show("ordered");
        } else if (code === "SOLD_OUT") {
          show("sold_out");
        } else if (code === "ENTRY_TOKEN_NOT_FOUND") {
          show("expired");
        } else if (code === "ENTRY_TOKEN_INVALID") {
          // Another tab holds a newer entry of this visitor: the page
          // fetches it by entering again.
          location.reload();
        } else if (code === "TOKEN_IN_USE") {
          orderNote(t("order.in_use"), 3000);
        } else if (r.status >= 500 || r.status === 429) {
          orderNote(t("order.busy"), 2000);
        } else if (code === "QUANTITY_OVER_LIMIT") {
          orderNote(t("order.too_many"), 0);
        } else {
          orderNote(t("order.refused"), 0);
        }
      }, function () {
        orderNote(t("order.unreachable"), 2000);
      });
  }

  // A full queue is not retried by itself: the visitor may try again once
  // the server's Retry-After has passed.
  function queueFull(seconds) {
    var link = $("retry"), left = seconds;
    link.setAttribute("aria-disabled", "true");
    link.addEventListener("click", function (e) { if (left > 0) { e.preventDefault(); } });
    (function count() {
      $("retry-after").setAttribute("data-seconds", String(Math.max(left, 0)));
      $("retry-after").textContent = left > 0 ? t("queue_full.retry", { N: left }) : t("queue_full.retry_now");
      if (left <= 0) { link.removeAttribute("aria-disabled"); return; }
      left--;
      setTimeout(count, 1000);
    })();
  }

  // The join challenge: find a nonce such that SHA-256(challenge "."
  // nonce) starts with difficulty zero bits, in batches of digests run
  // together (Web Crypto is asynchronous).
  function zeroBits(buf) {
    var b = new Uint8Array(buf), n = 0;
    for (var i = 0; i < b.length; i++) {
      if (b[i] === 0) { n += 8; continue; }
      return n + Math.clz32(b[i]) - 24;
    }
    return n;
  }
  function solve(challenge, difficulty) {
    var enc = new TextEncoder(), batch = 256, next = 0;
    function round() {
      var tries = [];
      for (var i = 0; i < batch; i++) {
        tries.push(crypto.subtle.digest("SHA-256", enc.encode(challenge + "." + (next + i))));
      }
      var base = next;
      next += batch;
      return Promise.all(tries).then(function (sums) {
        for (var i = 0; i < sums.length; i++) {
          if (zeroBits(sums[i]) >= difficulty) {
            document.body.setAttribute("data-solve-hashes", String(next));
            return String(base + i);
          }
        }
        return round();
      });
    }
    return round();
  }

  // join takes the place: the page's explicit step (the form's button does
  // the same without scripts). A refusal that says how to go on is
  // followed by itself: a fresh challenge (the one on the page was stale
  // or spent) is solved, a rate limit waited out, a few times at most.
  var joinRetries = 0;
  function join() {
    var button = $("join-button");
    button.disabled = true;
    var started = Date.now();
    var solved = boot.challenge ? solve(boot.challenge, boot.difficulty) : Promise.resolve("");
    solved.then(function (nonce) {
      if (boot.challenge) { document.body.setAttribute("data-solve-ms", String(Date.now() - started)); }
      var form = new URLSearchParams();
      if (boot.pass) { form.set("pass", boot.pass); }
      if (boot.challenge) { form.set("challenge", boot.challenge); form.set("nonce", nonce); }
      return fetch(boot.page_url, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded" },
        body: form.toString()
      });
    })
      .then(read)
      .then(function (r) {
        var code = codeOf(r.body);
        if (r.status === 200 && r.body.state === "waiting") {
          renderWaiting(r.body);
        } else if (r.status === 200 && r.body.state === "admitted") {
          renderAdmitted(r.body);
        } else if (r.status === 200 && r.body.state === "scheduled") {
          renderScheduled(r.body);
        } else if (r.status === 200 && r.body.state === "sold_out" || code === "SOLD_OUT") {
          show("sold_out");
        } else if (code === "QUEUE_FULL") {
          show("queue_full");
          queueFull(parseInt(r.body.retry_after, 10) || 30);
        } else if (code === "ROOM_CLOSED") {
          show("closed");
        } else if (code === "ROOM_NOT_FOUND") {
          show("no_room");
        } else if (code === "ALREADY_ORDERED") {
          show("already_ordered");
        } else if (invitations[code]) {
          // Trying again changes nothing: the way in is a (valid) invitation.
          $("invitation-message").textContent = t(invitations[code]);
          show("invitation");
        } else if (code === "CHALLENGE_REQUIRED" && r.body.challenge && joinRetries < 3) {
          joinRetries++;
          boot.challenge = r.body.challenge;
          boot.difficulty = r.body.difficulty;
          join();
        } else if (code === "RATE_LIMITED" && joinRetries < 5) {
          // Spread the retries: many shoppers behind one address were
          // refused at the same moment.
          joinRetries++;
          $("join-note").textContent = t("join.rate_limited");
          $("join-note").hidden = false;
          setTimeout(join, (Math.max(r.retryAfter, 1) + Math.random() * 2) * 1000);
        } else {
          $("join-note").textContent = t("join.failed");
          $("join-note").hidden = false;
          button.disabled = false;
        }
      }, function () {
        $("join-note").textContent = t("join.unreachable");
        $("join-note").hidden = false;
        button.disabled = false;
      });
  }

  // "Tell me when it's my turn" by Web Push: this device's subscription
  // goes to the room (the email form posts without a script).
  function subscribePush() {
    var key = boot.push_key.replace(/-/g, "+").replace(/_/g, "/");
    var raw = atob(key + "===".slice((key.length + 3) % 4));
    var bytes = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) { bytes[i] = raw.charCodeAt(i); }
    var said = function (ok) { $("notify-saved").hidden = !ok; $("notify-refused").hidden = ok; };
    navigator.serviceWorker.register("/notify-sw.js")
      .then(function () { return navigator.serviceWorker.ready; })
      .then(function (reg) { return reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: bytes }); })
      .then(function (sub) {
        return fetch(boot.notify_url, {
          method: "POST", credentials: "same-origin",
          headers: { "Content-Type": "application/json", "Accept": "application/json" },
          body: JSON.stringify({ push: sub.toJSON() })
        });
      })
      .then(function (r) { said(r.ok); }, function () { said(false); });
  }
  var pushButton = $("notify-push");
  if (pushButton && boot.push_key && "serviceWorker" in navigator && "PushManager" in window) {
    pushButton.hidden = false;
    pushButton.addEventListener("click", subscribePush);
  }

  var button = $("order");
  if (button) { button.addEventListener("click", order); }
  $("join-button").addEventListener("click", function (e) { e.preventDefault(); join(); });

  switch (boot.state) {
    case "waiting": renderWaiting(boot, true); break;
    case "scheduled": renderScheduled(boot); break;
    case "admitted": renderAdmitted(boot); break;
    case "queue_full": queueFull(boot.retry_after || 0); break;
    case "join": show("join"); join(); break;
    default: show(boot.state);
  }
})();
