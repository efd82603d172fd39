// The operator's dashboard. It holds nothing until the operator gives the
// admin token; the token lives in this tab's session storage and goes as
// the bearer of every call. Figures come from GET dashboard at most once a
// second (the server samples the store once a second for every dashboard);
// the chart's points are the store's history of the last ten minutes, a
// quiet room's drawn flat by the server, so the first load draws them all.
"use strict";
(() => {
  const tokenKey = "waitroom.adminToken";
  const keepSeconds = 600;
  // Passes change only when an operator mints or revokes one, or one is
  // used: read them every ten seconds, not every second.
  const passesEveryMS = 10000;
  // Webhook dead letters change when a delivery gives up after its 24 h or
  // somebody redelivers one: read them as often as the passes, the newest
  // deadShown (one more is asked for, to tell that more are kept).
  const deadEveryMS = 10000;
  const deadShown = 50;
  const $ = (id) => document.getElementById(id);
  // One way of writing numbers, times and dates on the whole screen: the
  // operator's browser's.
  const fmt = new Intl.NumberFormat();
  const fmt1 = new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 });
  const timeFmt = new Intl.DateTimeFormat(undefined, { timeStyle: "medium" });
  const dateFmt = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
  const when = (t) => dateFmt.format(new Date(t));
  // Passes minted from the dashboard: one use, for a week.
  const dashboardPass = { uses: 1, expires_in: "168h" };

  let token = sessionStorage.getItem(tokenKey) || "";
  let since = 0;
  let timer = 0;
  let generation = 0; // bumps on sign-out, so a poll in flight is dropped
  const rooms = new Map(); // name → card state
  let deadAt = 0;
  let deadIDs = ""; // the letters the table shows, in order

  function show(view) {
    document.body.dataset.view = view;
    $("login").hidden = view !== "login";
    $("rooms").hidden = view !== "rooms";
    $("dead").hidden = view !== "rooms";
    $("logout").hidden = view !== "rooms";
  }

  function banner(text) {
    $("banner").textContent = text || "";
    $("banner").hidden = !text;
  }

  class Refused extends Error {}

  async function api(method, path, body) {
    const headers = { Authorization: "Bearer " + token };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const r = await fetch(path, {
      method, headers, cache: "no-store", credentials: "omit",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    let data = null;
    try { data = await r.json(); } catch (_) { /* not JSON: a proxy's page */ }
    if (r.status === 401) throw new Refused("the admin token was refused");
    if (!r.ok) {
      const e = new Error((data && data.error && data.error.message) || "HTTP " + r.status);
      e.code = data && data.error && data.error.code;
      e.status = r.status;
      e.retryAfter = r.headers.get("Retry-After");
      throw e;
    }
    return data;
  }

  function signOut(reason) {
    generation++;
    clearTimeout(timer);
    token = "";
    sessionStorage.removeItem(tokenKey);
    for (const room of rooms.values()) room.plot && room.plot.destroy();
    rooms.clear();
    $("rooms").replaceChildren();
    clearDead();
    $("sampled").textContent = "";
    since = 0;
    banner("");
    $("login-error").textContent = reason || "";
    $("login-error").hidden = !reason;
    show("login");
    $("token").value = "";
    $("token").focus();
  }

  async function signIn(given) {
    token = given;
    const gen = ++generation;
    try {
      const d = await api("GET", "dashboard");
      if (gen !== generation) return;
      sessionStorage.setItem(tokenKey, token);
      $("login-error").hidden = true;
      show("rooms");
      render(d);
      schedule(gen);
    } catch (e) {
      if (gen !== generation) return;
      signOut(e instanceof Refused ? "That token was refused."
        : e.code === "RATE_LIMITED" ? "Too many wrong tokens from this address; try again in " + e.retryAfter + " s."
        : "Could not reach the server: " + e.message);
    }
  }

  function schedule(gen) {
    clearTimeout(timer);
    // At most one poll a second: the next starts a second after the last
    // one ended.
    timer = setTimeout(() => poll(gen), 1000);
  }

  async function poll(gen) {
    try {
      const d = await api("GET", "dashboard?since=" + since);
      if (gen !== generation) return;
      render(d);
    } catch (e) {
      if (gen !== generation) return;
      if (e instanceof Refused) {
        signOut("The admin token was refused; sign in again.");
        return;
      }
      banner("Cannot read the figures: " + e.message + ". Retrying…");
    }
    schedule(gen);
  }

  function render(d) {
    if (d.error) {
      banner("The store did not answer (" + d.error.code + "): figures from " + clock(d.sampled_at) + ".");
    } else {
      banner("");
    }
    $("sampled").textContent = d.sampled_at ? "updated " + clock(d.sampled_at) : "";
    const seen = new Set();
    for (const r of d.rooms) {
      seen.add(r.name);
      let room = rooms.get(r.name);
      if (!room) {
        room = newCard(r.name);
        rooms.set(r.name, room);
        $("rooms").append(room.card);
      }
      updateCard(room, r, d.every_ms || 1000);
      if (Date.now() - room.passesAt >= passesEveryMS) loadPasses(room);
    }
    if (Date.now() - deadAt >= deadEveryMS) loadDead();
    for (const [name, room] of rooms) {
      if (!seen.has(name)) {
        room.plot && room.plot.destroy();
        room.card.remove();
        rooms.delete(name);
      }
    }
  }

  function clock(ms) {
    return timeFmt.format(new Date(ms));
  }

  function duration(s) {
    s = Math.ceil(s);
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
    return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  }

  function newCard(name) {
    const card = $("room-card").content.firstElementChild.cloneNode(true);
    card.dataset.room = name;
    card.querySelector(".name").textContent = name;
    const room = {
      name, card, plot: null, cfg: null, passesAt: 0,
      data: [[], [], [], []], // seconds, admitted/s, rate, waiting
      field: (f) => card.querySelector('[data-f="' + f + '"]'),
    };
    card.querySelectorAll("[data-act]").forEach((b) =>
      b.addEventListener("click", () => control(room, b.dataset.act)));
    const form = (cls, read) => card.querySelector(cls).addEventListener("submit", (ev) => {
      ev.preventDefault();
      const [act, value, wrong] = read(ev.target.elements);
      if (wrong) note(room, wrong);
      else control(room, act, value);
    });
    form(".rate-form", (el) => {
      const rate = Number(el.rate.value);
      return ["rate", rate, rate > 0 ? "" : "The rate must be a number above 0."];
    });
    form(".stock-form", (el) => {
      const stock = Number(el.stock.value);
      return ["stock", stock, Number.isInteger(stock) && stock >= 0 ? "" : "The stock is a whole number, 0 or more."];
    });
    form(".opening-form", (el) => {
      if (el.opens_at.value === "") return ["opening", "", ""];
      const at = new Date(el.opens_at.value); // the browser's time zone
      return ["opening", isNaN(at) ? "" : at.toISOString(), isNaN(at) ? "That is not a date and time." : ""];
    });
    return room;
  }

  function updateCard(room, r, everyMS) {
    room.cfg = r;
    const f = r.figures || {};
    const state = room.card.querySelector(".state");
    state.textContent = r.state;
    state.dataset.state = r.state;
    room.card.dataset.state = r.state;
    room.field("rate").textContent = fmt1.format(r.rate) + "/s";
    room.field("waiting").textContent = fmt.format(f.waiting || 0);
    room.field("live_tokens").textContent = fmt.format(f.live_tokens || 0);
    room.field("admitted_per_second").textContent =
      f.admitted_per_second == null ? "–" : fmt1.format(f.admitted_per_second);
    room.field("completed").textContent = fmt.format(f.completed || 0);
    room.field("expired").textContent = fmt.format(f.expired || 0);
    room.field("eta_last").textContent = r.eta_last_seconds == null
      ? "on hold"
      : (f.waiting ? duration(r.eta_last_seconds) : "no queue");
    // Figures the room has only with some features: shown when present.
    // With stock tracked, completed tokens are units sold.
    const optional = { abandoned: f.abandoned, units_left: f.units_left, sold: r.stock > 0 ? f.completed : null };
    room.card.querySelector(".sold-out").hidden = !f.sold_out;
    if (f.sold_out) room.field("eta_last").textContent = "sold out";
    for (const opt of room.card.querySelectorAll("[data-optional]")) {
      const v = optional[opt.dataset.optional];
      opt.hidden = v == null;
      if (v != null) room.field(opt.dataset.optional).textContent = fmt.format(v);
    }
    room.card.querySelector('[data-act="pause"]').hidden = r.state !== "open";
    room.card.querySelector('[data-act="resume"]').hidden = r.state === "open";
    room.card.querySelector('[data-act="close"]').hidden = r.state === "closed";
    const settings = [];
    if (r.opens_at) settings.push((Date.parse(r.opens_at) > Date.now() ? "Opens " : "Opened ") + when(r.opens_at));
    if (r.closes_at) settings.push("Closes " + when(r.closes_at));
    if (r.invite_only) settings.push("Invite only");
    if (r.one_order_per_user) settings.push("One order per buyer");
    settings.push(r.stock > 0 ? "Stock " + fmt.format(r.stock) : "Stock not tracked");
    room.card.querySelector(".settings").textContent = settings.join(" · ");
    for (const [name, value] of [["rate", r.rate], ["stock", r.stock]]) {
      const input = room.card.querySelector('input[name="' + name + '"]');
      if (document.activeElement !== input) input.placeholder = String(value);
    }

    const [ts, adm, rate, waiting] = room.data;
    for (const p of r.series || []) {
      const t = p.t / 1000;
      if (ts.length && t <= ts[ts.length - 1]) continue; // already drawn
      if (ts.length && t - ts[ts.length - 1] > 3 * everyMS / 1000) {
        // Nothing was recorded in between: break the lines, do not join them.
        ts.push(ts[ts.length - 1] + everyMS / 1000); adm.push(null); rate.push(null); waiting.push(null);
      }
      ts.push(t); adm.push(p.admitted_per_second); rate.push(p.rate); waiting.push(p.waiting);
      since = Math.max(since, p.t);
    }
    while (ts.length && ts[0] < ts[ts.length - 1] - keepSeconds) room.data.forEach((a) => a.shift());
    drawChart(room);
  }

  function chartWidth(room) {
    return Math.max(240, room.card.querySelector(".chart").clientWidth);
  }

  function drawChart(room) {
    if (!window.uPlot) return;
    if (room.plot) {
      room.plot.setData(room.data);
      return;
    }
    const el = room.card.querySelector(".chart");
    const upTo = (u, min, max) => [0, Math.max(1, (max || 0) * 1.1)];
    room.plot = new uPlot({
      width: chartWidth(room),
      height: 220,
      legend: { live: false },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true }, perSec: { range: upTo }, people: { range: upTo } },
      series: [
        {},
        { label: "admitted/s", scale: "perSec", stroke: "#0969da", width: 2, fill: "#0969da18", spanGaps: false },
        { label: "rate", scale: "perSec", stroke: "#8c959f", width: 1.5, dash: [6, 4], spanGaps: false, paths: uPlot.paths.stepped({ align: 1 }) },
        { label: "waiting", scale: "people", stroke: "#bf8700", width: 2, spanGaps: false },
      ],
      axes: [
        { space: 70 },
        { scale: "perSec", label: "users/s", size: 55 },
        { scale: "people", side: 1, label: "waiting", size: 60, grid: { show: false } },
      ],
    }, room.data, el);
    new ResizeObserver(() => room.plot && room.plot.setSize({ width: chartWidth(room), height: 220 })).observe(el);
  }

  function passState(p) {
    if (p.revoked) return "revoked";
    if (new Date(p.expires_at).getTime() <= Date.now()) return "expired";
    if (p.left === 0) return "used up";
    return "valid";
  }

  async function loadPasses(room) {
    room.passesAt = Date.now();
    const gen = generation;
    let list;
    try {
      list = (await api("GET", "rooms/" + encodeURIComponent(room.name) + "/passes")).passes || [];
    } catch (e) {
      if (e instanceof Refused) signOut("The admin token was refused; sign in again.");
      return; // the next round tries again
    }
    if (gen !== generation) return;
    const box = room.card.querySelector(".passes");
    box.hidden = list.length === 0;
    const valid = list.filter((p) => passState(p) === "valid").length;
    room.card.querySelector(".pass-count").textContent = list.length + " (" + valid + " valid)";
    const rows = list.map((p) => {
      const tr = document.createElement("tr");
      const state = passState(p);
      tr.dataset.state = state;
      tr.dataset.pass = p.id;
      const cells = [p.id.slice(0, 8) + "…", p.left + " of " + p.uses,
        when(p.expires_at), state];
      cells.forEach((text, i) => {
        const td = document.createElement("td");
        td.textContent = text;
        if (i === 0) { td.className = "id"; td.title = p.link; }
        tr.append(td);
      });
      const td = document.createElement("td");
      if (state === "valid") {
        const b = document.createElement("button");
        b.type = "button";
        b.textContent = "Revoke";
        b.dataset.act = "revoke";
        b.addEventListener("click", () => revoke(room, p));
        td.append(b);
      }
      tr.append(td);
      return tr;
    });
    room.card.querySelector(".passes tbody").replaceChildren(...rows);
  }

  async function revoke(room, p) {
    const question = "Revoke pass " + p.id.slice(0, 8) + "… of " + room.name + "? Its link stops working at once (" + p.left + " of " + p.uses + " uses were left).";
    if (!(await confirmed(question, "Revoke"))) return;
    try {
      await api("DELETE", "rooms/" + encodeURIComponent(room.name) + "/passes/" + encodeURIComponent(p.id));
      note(room, "Pass " + p.id.slice(0, 8) + "… revoked.");
    } catch (e) {
      if (e instanceof Refused) { signOut("The admin token was refused; sign in again."); return; }
      note(room, "Not done: " + e.message);
    }
    loadPasses(room);
  }

  // Webhook dead letters: the messages an endpoint did not take within
  // their 24 h of retries (GET webhooks/dead, newest first), each
  // redelivered from here after a confirmation. Everything in them comes
  // from outside (a receiver's answer, the endpoint's URL, the room's
  // users), so it goes in as text, never as markup.

  function clearDead() {
    deadAt = 0;
    deadIDs = "";
    $("dead-summary").textContent = "";
    $("dead-status").textContent = "";
    const table = $("dead").querySelector("table");
    table.hidden = true;
    table.tBodies[0].replaceChildren();
  }

  function deadStatus(text) {
    // The same text again is not news: a live region set to it anew may
    // be read out again.
    if ($("dead-status").textContent !== text) $("dead-status").textContent = text;
  }

  // shownURL is an endpoint's URL as the table shows it: scheme, host and
  // path, without a query (which may hold the receiver's token).
  function shownURL(raw) {
    try {
      const u = new URL(raw);
      return u.origin + u.pathname + (u.search ? "?…" : "");
    } catch (_) {
      return raw;
    }
  }

  async function loadDead() {
    deadAt = Date.now();
    const gen = generation;
    let dead, endpoints;
    try {
      [dead, endpoints] = await Promise.all([
        api("GET", "webhooks/dead?limit=" + (deadShown + 1)).then((d) => d.dead || []),
        api("GET", "webhooks").then((d) => d.endpoints || []),
      ]);
    } catch (e) {
      if (gen !== generation) return;
      if (e instanceof Refused) { signOut("The admin token was refused; sign in again."); return; }
      if (e.status === 404 && e.code === "NOT_FOUND") {
        // This server was built without webhooks: no routes for them.
        clearDead();
        $("dead-summary").textContent = "Webhooks are off on this server: there are no dead letters.";
        return;
      }
      deadStatus("Cannot read the dead letters: " + e.message + (e.code ? " (" + e.code + ")" : "") + ". Retrying in 10 s.");
      return;
    }
    if (gen !== generation) return;
    if ($("dead-status").textContent.startsWith("Cannot read")) deadStatus("");
    const more = dead.length > deadShown;
    dead = dead.slice(0, deadShown);
    $("dead-summary").textContent = dead.length === 0
      ? "No dead letters: every webhook message was delivered or is still being retried."
      : more
        ? "The newest " + fmt.format(deadShown) + " dead letters; more are kept (waitroom admin webhooks dead --limit 1000 lists them)."
        : fmt.format(dead.length) + (dead.length === 1 ? " dead letter." : " dead letters, newest first.");
    const ids = dead.map((d) => d.id).join(" ");
    if (ids === deadIDs) return; // unchanged: keep the rows, and the focus in them
    deadIDs = ids;
    const urls = new Map(endpoints.map((ep) => [ep.id, ep.url]));
    const table = $("dead").querySelector("table");
    table.hidden = dead.length === 0;
    table.tBodies[0].replaceChildren(...dead.map((d) => deadRow(d, urls.get(d.endpoint))));
  }

  // deadLabels: the table's column names, from its header (one place
  // for the words).
  function deadLabels() {
    return Array.from($("dead").querySelectorAll("thead th"), (th) => th.textContent);
  }

  function deadRow(d, url) {
    const tr = document.createElement("tr");
    tr.dataset.dead = d.id;
    const endpoint = url === undefined ? d.endpoint + " (removed)" : shownURL(url);
    tr.setAttribute("role", "row");
    const cells = [d.type, d.room, endpoint, when(d.at), fmt.format(d.attempts), d.last_error];
    const classes = ["", "", "endpoint", "", "num", "error"];
    const labels = deadLabels();
    cells.forEach((text, i) => {
      const td = document.createElement("td");
      td.textContent = text;
      td.setAttribute("role", "cell");
      td.dataset.label = labels[i]; // shown before it on a phone (admin.css)
      if (classes[i]) td.className = classes[i];
      if (i === 2) td.title = d.endpoint;
      tr.append(td);
    });
    const td = document.createElement("td");
    td.setAttribute("role", "cell");
    td.className = "act";
    if (url === undefined) {
      // Its consumer group went with it: a redelivery would reach nobody.
      td.textContent = "endpoint removed";
    } else {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = "Redeliver";
      b.dataset.act = "redeliver";
      b.setAttribute("aria-label", "Redeliver " + d.type + " of " + d.room + " to " + endpoint);
      b.addEventListener("click", () => redeliver(d, endpoint, tr));
      td.append(b);
    }
    tr.append(td);
    return tr;
  }

  // keepFocusInDead: a row's button that went away took the keyboard's
  // place with it; the section's heading keeps it where the operator was.
  function keepFocusInDead() {
    if (!document.activeElement || document.activeElement === document.body) $("dead-title").focus();
  }

  async function redeliver(d, endpoint, tr) {
    const question = "Redeliver " + d.type + " of " + d.room + " to " + endpoint + "? It is sent again with the same webhook-id (" +
      d.event_id + "), retried for another 24 h, and leaves this list.";
    if (!(await confirmed(question, "Redeliver"))) return;
    const gen = generation;
    const act = tr.querySelector(".act");
    const button = act.querySelector("button");
    button.disabled = true; // one redelivery at a time
    try {
      await api("POST", "webhooks/dead/" + encodeURIComponent(d.id) + "/redeliver");
      if (gen !== generation) return;
      // The log took it off its dead letters: the next read drops the row.
      tr.dataset.state = "queued";
      act.textContent = "queued again";
      keepFocusInDead();
      deadStatus(d.type + " of " + d.room + " is queued again for " + endpoint + " (webhook-id " + d.event_id + ").");
    } catch (e) {
      if (gen !== generation) return;
      if (e instanceof Refused) { signOut("The admin token was refused; sign in again."); return; }
      if (e.code === "DEAD_LETTER_NOT_FOUND") {
        tr.dataset.state = "gone";
        act.textContent = "no longer dead";
        keepFocusInDead();
        deadStatus("Not redelivered: " + e.message + " (" + e.code + "): somebody redelivered it already.");
        return;
      }
      button.disabled = false;
      deadStatus("Not redelivered: " + e.message + (e.code ? " (" + e.code + ")" : "") + ". Try again.");
    }
  }

  function note(room, text) {
    room.card.querySelector(".note").textContent = text;
  }

  // What each control does, said before it is done.
  const controls = {
    pause: (r) => ["Pause " + r.name + "? Nobody is admitted until you resume; people can still join the queue.", "Pause", { state: "paused" }],
    resume: (r) => ["Resume " + r.name + "? Admissions restart at " + fmt1.format(r.rate) + " users/s.", "Resume", { state: "open" }],
    close: (r) => ["Close " + r.name + "? New arrivals are turned away (ROOM_CLOSED); people already in the queue are still admitted.", "Close the room", { state: "closed" }],
    rate: (r, v) => ["Change the rate of " + r.name + " from " + fmt1.format(r.rate) + " to " + fmt1.format(v) + " users/s?", "Set rate", { rate: v }],
    stock: (r, v) => ["Set the stock of " + r.name + " from " + (r.stock > 0 ? fmt.format(r.stock) : "not tracked") + " to " +
      (v > 0 ? fmt.format(v) + " units (sold ones included)" : "not tracked") + "?" +
      (v > r.stock && r.stock > 0 ? " Raising it is a restock: buyers turned away as sold out can come back." : ""), "Set stock", { stock: v }],
    opening: (r, v) => [v === "" ? "Remove the opening of " + r.name + "? Arrivals are queued at once, in order."
      : "Set the opening of " + r.name + " to " + when(v) + "? Until then arrivals wait in the prequeue and get their places in the draw.", "Set opening", { opens_at: v }],
    pass: (r) => ["Create a pass for " + r.name + "? Its link lets one buyer in without queueing, for a week" +
      (r.invite_only ? "" : " (the room is not invite-only: anyone can still queue)") + ".", "Create pass"],
  };

  async function control(room, act, value) {
    const [question, verb, body] = controls[act](room.cfg, value);
    if (!(await confirmed(question, verb))) return;
    const gen = generation;
    try {
      if (act === "pass") {
        const p = await api("POST", "rooms/" + encodeURIComponent(room.name) + "/passes", dashboardPass);
        if (gen !== generation) return;
        note(room, "Pass created: " + new URL(p.link, location.href).href);
        loadPasses(room);
        return;
      }
      const r = await api("PATCH", "rooms/" + encodeURIComponent(room.name), body);
      if (gen !== generation) return;
      // Show the change at once (the figures stay those of the last
      // sample); the next sample confirms it.
      room.cfg = Object.assign({}, room.cfg, r, { figures: room.cfg.figures, series: [] });
      updateCard(room, room.cfg, 1000);
      note(room, {
        rate: () => "Rate set to " + fmt1.format(r.rate) + "/s.",
        stock: () => r.stock > 0 ? "Stock set to " + fmt.format(r.stock) + "." : "Stock is not tracked.",
        opening: () => r.opens_at ? "Opens " + when(r.opens_at) + "." : "No opening set.",
      }[act]?.() ?? "Room is " + r.state + ".");
      room.card.querySelectorAll(".controls form").forEach((f) => f.reset());
    } catch (e) {
      if (e instanceof Refused) signOut("The admin token was refused; sign in again.");
      else note(room, "Not done: " + e.message);
    }
  }

  function confirmed(question, verb) {
    const dialog = $("confirm");
    $("confirm-text").textContent = question;
    $("confirm-ok").textContent = verb;
    return new Promise((resolve) => {
      const done = (ok) => () => {
        $("confirm-ok").onclick = $("confirm-cancel").onclick = dialog.oncancel = null;
        dialog.close();
        resolve(ok);
      };
      $("confirm-ok").onclick = done(true);
      $("confirm-cancel").onclick = done(false);
      dialog.oncancel = done(false);
      dialog.showModal();
      $("confirm-cancel").focus();
    });
  }

  $("login-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const given = $("token").value.trim();
    if (given) signIn(given);
  });
  $("logout").addEventListener("click", () => signOut(""));

  if (token) signIn(token);
  else show("login");
})();
