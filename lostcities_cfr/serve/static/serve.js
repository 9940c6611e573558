// The serve page: renders what the JSON API returns (lostcities_cfr/serve/app.py).
// Plain JavaScript, no build step. Every text from the server goes in through textContent.
"use strict";

const $ = (id) => document.getElementById(id);

// el("td", {class: "number"}, "0.25", child...): an element with attributes and children
function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "onclick") node.addEventListener("click", value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

async function api(method, path, body) {
  const options = { method, headers: {} };
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await fetch(path, options);
  const data = await response.json().catch(() => ({ detail: response.statusText }));
  if (!response.ok) throw new Error(data.detail || `${response.status} ${response.statusText}`);
  return data;
}

// The page's own clock from a click to the page redrawn: document.body.dataset.lastMs
// (scripts/bench_serve.py --browser reads it; it is free of the test driver's overheads).
function timed(started) {
  document.body.dataset.lastMs = (performance.now() - started).toFixed(1);
}

function showError(error) {
  $("error").hidden = !error;
  $("error").textContent = error ? String(error.message || error) : "";
}

// ---- the board -----------------------------------------------------------------------------

const card = (c, extra = "") => el("span", { class: `card ${c.color} ${extra}`.trim() }, c.name);

function scoreCell(score) {
  const sign = score > 0 ? "positive" : score < 0 ? "negative" : "";
  return el("div", { class: `score ${sign}` }, score);
}

// names: {top, bottom} labels of the two players
function renderBoard(board, names) {
  const columns = board.colors.length;
  const grid = el("div", { class: "board", style: `grid-template-columns: 7em repeat(${columns}, 1fr)` });
  grid.append(el("div"), ...board.colors.map((c) => el("div", { class: "colour" }, c)));
  const expeditionRows = (player, name, scoresBelow) => {
    const stacks = player.expeditions.map((cards) => el("div", { class: "stack" }, cards.map((c) => card(c))));
    const scores = player.scores.map(scoreCell);
    const label = `${name} (${player.total})`;
    if (scoresBelow) grid.append(el("div", { class: "label" }, label), ...stacks, el("div"), ...scores);
    else grid.append(el("div"), ...scores, el("div", { class: "label" }, label), ...stacks);
  };
  expeditionRows(board.top, names.top, false);
  grid.append(
    el("div", { class: "label piles" }, `discard piles · deck ${board.deck}`),
    ...board.piles.map((pile) =>
      el("div", { class: "stack piles" }, pile.map((c, i) => card(c, i === pile.length - 1 ? "top-of-pile" : "")))),
  );
  expeditionRows(board.bottom, names.bottom, true);

  const hand = (player, name) => {
    const row = el("div", { class: "hand" }, el("span", { class: "who" }, name === "You" ? "Your hand" : `${name}'s hand`));
    if (player.hand) row.append(...player.hand.map((c) => card(c)));
    else {
      row.append(`${player.hand_size} cards`);
      if (player.known.length) row.append(" · known from pile draws: ", ...player.known.map((c) => card(c)));
    }
    return row;
  };
  return el("div", {}, hand(board.top, names.top), grid, hand(board.bottom, names.bottom));
}

// ---- an agent's reasoning ------------------------------------------------------------------

function format(label, value) {
  if (value === null || value === undefined) return "–";
  return label === "probability" ? value.toFixed(3) : value.toFixed(2);
}

function renderReasoning(decision, who) {
  const labels = decision.labels;
  const head = el("tr", {}, el("th", {}, "action"), labels.map((l) => el("th", { class: "number" }, l)));
  const rows = decision.top.map((row) =>
    el("tr", { class: row.chosen ? "chosen" : null },
      el("td", {}, row.text, row.chosen ? " ◀" : ""),
      labels.map((l) => el("td", { class: "number" },
        l === "probability" ? el("span", { class: "bar", style: `width: ${Math.round(60 * (row[l] || 0))}px` }) : null,
        format(l, row[l])))));
  const block = el("div", { class: "reply" },
    el("div", {}, el("strong", {}, who), `: ${decision.text}`, el("span", { class: "note" }, ` (${decision.legal} legal, ${decision.ms} ms)`)),
    el("table", {}, el("thead", {}, head), el("tbody", {}, rows)));
  if (!decision.explained) {
    block.append(el("div", { class: "note" }, "This agent gives no probabilities: 1 marks the action it chooses."));
  }
  return block;
}

// ---- playing -------------------------------------------------------------------------------

let game = null; // the match as the server last sent it
let busy = false; // a request is on its way: moves wait for it

function setBusy(value) {
  busy = value;
  document.body.dataset.busy = value ? "1" : "0";
  for (const button of document.querySelectorAll("#moves button, #summary button, #new-game")) button.disabled = value;
}

async function request(method, path, body) {
  setBusy(true);
  try {
    const view = await api(method, path, body);
    showError(null);
    return view;
  } catch (error) {
    showError(error);
    return null;
  } finally {
    setBusy(false);
  }
}

async function newGame() {
  const view = await request("POST", "/api/games", { seat: Number($("seat").value), rounds: Number($("rounds").value) });
  if (view) renderGame(view);
}

async function move(action) {
  if (busy || !game) return;
  const started = performance.now();
  const view = await request("POST", `/api/games/${game.id}/moves`, { action, turn: game.board.turn });
  if (view) renderGame(view);
  timed(started);
}

async function nextRound() {
  const view = await request("POST", `/api/games/${game.id}/next-round`);
  if (view) renderGame(view);
}

function renderGame(view) {
  game = view;
  document.body.dataset.turn = view.board.turn;
  document.body.dataset.roundOver = view.round_over ? "1" : "0";
  const names = { top: view.agent, bottom: "You" };
  $("board").replaceChildren(renderBoard(view.board, names));
  $("status").textContent = view.match_over ? "The match is over."
    : view.round_over ? "The round is over."
    : view.your_turn ? (view.board.phase === "card" ? "Your turn: play or discard a card." : "Your turn: draw a card.")
    : "";

  const groups = {};
  for (const m of view.moves) (groups[m.group] ||= []).push(m);
  $("moves").replaceChildren(...Object.entries(groups).map(([group, moves]) =>
    el("div", { class: "group" }, el("span", {}, group),
      moves.map((m) => el("button", { class: "move", type: "button", "data-action": m.action, onclick: () => move(m.action) }, m.label)))));

  $("reasoning").replaceChildren(...(view.replies.length
    ? view.replies.map((r) => renderReasoning(r, view.agent))
    : [el("p", { class: "note" }, "The agent has not moved yet.")]));
  $("log").replaceChildren(...view.log.map((entry) =>
    el("li", { class: entry.who }, entry.who === "you" ? "You: " : `${view.agent}: `, entry.text)));
  $("log").scrollTop = $("log").scrollHeight;

  const s = view.scores;
  const rows = s.rounds.map((r, i) => el("tr", {}, el("td", {}, `round ${i + 1}`), el("td", { class: "number" }, r[0]), el("td", { class: "number" }, r[1])));
  if (!view.round_over) rows.push(el("tr", {}, el("td", {}, `round ${view.round} (so far)`), el("td", { class: "number" }, s.round[0]), el("td", { class: "number" }, s.round[1])));
  if (view.rounds > 1) rows.push(el("tr", { class: "chosen" }, el("td", {}, "match"), el("td", { class: "number" }, s.match[0]), el("td", { class: "number" }, s.match[1])));
  $("scores").replaceChildren(
    el("div", { class: "note" }, `Round ${view.round} of ${view.rounds} · ${view.rules} rules · you ${view.you === 0 ? "move first" : "move second"}` +
      (view.seed === null ? "" : ` · deals from seed ${view.seed} (play --seed ${view.seed} deals them again)`)),
    el("table", {}, el("thead", {}, el("tr", {}, el("th"), el("th", { class: "number" }, "you"), el("th", { class: "number" }, view.agent))), el("tbody", {}, rows)));

  const summary = $("summary");
  summary.replaceChildren();
  if (view.summary) {
    summary.append(renderSummary(view.summary, (seat) => (seat === view.you ? "You" : view.agent)));
    if (!view.match_over) summary.append(el("button", { id: "next-round", type: "button", onclick: nextRound }, "Next round"));
    else {
      const [you, them] = s.match;
      summary.append(el("p", {}, el("strong", {}, you > them ? `You win the match, ${you} to ${them}.` : you < them ? `${view.agent} wins the match, ${them} to ${you}.` : `A draw, ${you} each.`)));
    }
  }
}

function renderSummary(summary, name) {
  return el("div", {}, summary.map((player) =>
    el("div", {}, el("strong", {}, `${name(player.seat)}: ${player.score}`),
      el("ul", {}, player.expeditions.map((line) => el("li", {}, line))))));
}

// ---- replays -------------------------------------------------------------------------------

const replay = { games: [], sortKey: "game", ascending: true, game: null, step: 0, steps: 0 };

async function loadReplays() {
  const started = performance.now();
  try {
    const data = await api("GET", "/api/replays");
    replay.games = data.games;
    $("replay-file").textContent = `${data.file}: ${data.games.length} games. Click a column to sort, a game to open it.`;
    renderGameList();
    timed(started);
  } catch (error) {
    showError(error);
  }
}

function renderGameList() {
  const { sortKey, ascending } = replay;
  const sorted = [...replay.games].sort((a, b) => (a[sortKey] - b[sortKey] || a.game - b.game) * (ascending ? 1 : -1));
  for (const th of document.querySelectorAll("#games th")) {
    th.classList.toggle("sorted-ascending", th.dataset.key === sortKey && ascending);
    th.classList.toggle("sorted-descending", th.dataset.key === sortKey && !ascending);
  }
  document.querySelector("#games tbody").replaceChildren(...sorted.map((g) =>
    el("tr", { class: g.game === replay.game ? "open" : null, "data-game": g.game, onclick: () => openReplay(g.game, 0) },
      el("td", { class: "number" }, g.game), el("td", { class: "number" }, g.deal),
      el("td", {}, `${g.agent} vs ${g.opponent}`), el("td", { class: "number" }, g.agent_seat),
      el("td", { class: "number" }, `${g.scores[g.agent_seat]} : ${g.scores[1 - g.agent_seat]}`),
      el("td", { class: "number" }, g.diff))));
}

async function openReplay(gameIndex, step) {
  const started = performance.now();
  try {
    const view = await api("GET", `/api/replays/${gameIndex}?step=${step}`);
    showError(null);
    const changed = replay.game !== view.game;
    Object.assign(replay, { game: view.game, step: view.step, steps: view.steps });
    if (changed) renderGameList();
    renderReplay(view);
    timed(started);
  } catch (error) {
    showError(error);
  }
}

function renderReplay(view) {
  document.body.dataset.replayStep = view.step;
  const seatName = (seat) => `${view.seats[seat]} (seat ${seat})`;
  $("step-label").textContent = `game ${view.game} · decision ${Math.min(view.step + 1, view.steps)} of ${view.steps}${view.step === view.steps ? " · end" : ""}`;
  $("replay-board").replaceChildren(renderBoard(view.board, { top: seatName(1 - view.agent_seat), bottom: seatName(view.agent_seat) }));
  const decision = view.decision;
  $("replay-decision").replaceChildren();
  if (decision && decision.unavailable) {
    $("replay-decision").append(el("p", {}, el("strong", {}, seatName(decision.player)), `: ${decision.text}`), el("p", { class: "note" }, decision.unavailable));
  } else if (decision) {
    $("replay-decision").append(renderReasoning(decision, seatName(decision.player)),
      el("div", { class: "note" }, "◀ marks the recorded action; the probabilities are the agent's, recomputed here."));
  }
  $("replay-summary").replaceChildren(...(view.summary ? [renderSummary(view.summary, seatName)] : []));
}

function stepTo(step) {
  if (replay.game === null) return;
  const clamped = Math.max(0, Math.min(replay.steps, step));
  if (clamped !== replay.step) openReplay(replay.game, clamped);
}

// ---- wiring --------------------------------------------------------------------------------

function showTab(name) {
  for (const tab of ["play", "replays"]) {
    $(tab).hidden = tab !== name;
    $(`tab-${tab}`).classList.toggle("active", tab === name);
  }
}

$("new-game").addEventListener("click", newGame);
$("tab-play").addEventListener("click", () => showTab("play"));
$("tab-replays").addEventListener("click", () => showTab("replays"));
$("step-first").addEventListener("click", () => stepTo(0));
$("step-back").addEventListener("click", () => stepTo(replay.step - 1));
$("step-forward").addEventListener("click", () => stepTo(replay.step + 1));
$("step-last").addEventListener("click", () => stepTo(replay.steps));
for (const th of document.querySelectorAll("#games th.sortable")) {
  th.addEventListener("click", () => {
    const key = th.dataset.key;
    // a new column sorts ascending first: the score difference's worst losses on top
    const started = performance.now();
    replay.ascending = replay.sortKey === key ? !replay.ascending : true;
    replay.sortKey = key;
    renderGameList();
    timed(started);
  });
}
document.addEventListener("keydown", (event) => {
  if ($("replays").hidden || event.target.tagName === "SELECT") return;
  if (event.key === "ArrowLeft") stepTo(replay.step - 1);
  if (event.key === "ArrowRight") stepTo(replay.step + 1);
});

(async function start() {
  try {
    const info = await api("GET", "/api/info");
    $("info").textContent = `against ${info.agent} · ${info.rules} rules`;
    if (info.replay) {
      $("tab-replays").hidden = false;
      await loadReplays();
    }
  } catch (error) {
    showError(error);
  }
  await newGame();
})();
