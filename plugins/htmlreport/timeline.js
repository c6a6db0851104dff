/* perfstack's Timeline pane: every backend run's events on one time axis, on a canvas.
   Plain JavaScript, nothing fetched; names arrive as JSON data and are drawn as text.
   Wheel or w/s zoom at the pointer, drag or a/d pan, shift-drag selects a range (its busy
   share and top names by own time, per track), a click shows a slice, 0 goes back to the
   profiled span, 9 shows the whole run. */
(function () {
  'use strict';
  var box = document.getElementById('timeline-box');
  if (!box) { return; }
  /* its data is parsed, and its tracks laid out, only when the pane is first shown: a page
     opened on another pane pays nothing for it */
  function visible() {
    var p = document.getElementById('pane-timeline');
    return !!p && (!p.hidden || location.hash === '#pane-timeline');
  }
  var started = false, pending = null;
  function begin(force) { if (!started && (force || visible())) { started = true; run(); } }
  /* when (ms from navigation) its script ran, its data was asked for and read: a bench reads
     them; a row's link may ask for a name or a step before the data is read: gone to once
     it is */
  var timing = {script: performance.now()};
  window.perfstackTimeline = {draws: 0, lastDrawMs: null, started: false, timing: timing,
                              find: function (name) { later('find', [name]); },
                              goStep: function (group, k) { later('goStep', [group, k]); }};
  function later(what, args) { pending = {what: what, args: args}; begin(true); }
  window.addEventListener('hashchange', function () { begin(false); });
  document.addEventListener('click', function () { setTimeout(function () { begin(false); }, 0); });
  begin(false);  /* a page opened on this pane asks for its data at once */
  setTimeout(function () { begin(false); }, 0);
  /* the page's data and each chunk beside it are packed: JSON, gzip, base64; the browser
     inflates them itself */
  function inflate(packed) {
    var raw = atob(packed.trim());
    var bytes = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) { bytes[i] = raw.charCodeAt(i); }
    /* the bytes written to the stream at once (a Blob's stream feeds it in small chunks:
       half as fast again on a job's 1.5 MB) */
    var stream = new DecompressionStream('gzip'), writer = stream.writable.getWriter();
    writer.write(bytes).catch(function () {});  /* (a bad stream fails the read below) */
    writer.close().catch(function () {});
    return new Response(stream.readable).json();
  }
  /* the rest of the page (its tables) is set up once the first draw is on the screen */
  function drawn() {
    requestAnimationFrame(function () {
      setTimeout(function () { document.dispatchEvent(new Event('perfstack-timeline-drawn')); }, 0);
    });
  }
  function run() {
    var said = document.getElementById('timeline-status');
    var failed = function (err) { if (said) { said.textContent = 'the timeline\'s data could not be read: ' + err; } drawn(); };
    timing.asked = performance.now();
    try {
      inflate(document.getElementById('perfstack-timeline').textContent).then(build, failed);
    } catch (err) { failed(err); }
  }
  function build(DATA) {
  timing.read = performance.now();
  var LANE = 13, HEADER = 16, COUNTER = 34, LABEL = 190, MAX_LANES = 14;
  var tracks = DATA.tracks, names = DATA.names, notes = null;
  var end = 0;
  tracks.forEach(function (t) {
    var deepest = 0;
    t.maxDur = 0;
    t.top = 0;
    for (var i = 0; i < t.ts.length; i++) {
      var e = t.ts[i] + (t.dur ? t.dur[i] : 0);
      if (e > end) { end = e; }
      if (t.dur && t.dur[i] > t.maxDur) { t.maxDur = t.dur[i]; }
      if (t.depth && t.depth[i] > deepest) { deepest = t.depth[i]; }
      if (t.value && t.value[i] > t.top) { t.top = t.value[i]; }
    }
    t.top = t.top || 1;
    t.lanes = t.kind === 'slices' ? Math.min(MAX_LANES, 1 + deepest) : 0;
    t.height = HEADER + (t.kind === 'slices' ? t.lanes * LANE : COUNTER);
  });
  end = end || 1;
  var home = DATA.home && DATA.home[1] > DATA.home[0] ? {a: DATA.home[0], b: DATA.home[1]} : {a: 0, b: end};
  var view = {a: home.a, b: home.b}, selection = null, query = '', picked = null;
  var canvas = document.createElement('canvas');
  canvas.id = 'timeline-canvas';
  canvas.tabIndex = 0;
  canvas.setAttribute('aria-label', 'timeline: wheel or w/s zoom, drag or a/d pan, shift-drag selects');
  var status = document.getElementById('timeline-status');
  var details = document.getElementById('timeline-details');
  var summary = document.getElementById('timeline-selection');
  var search = document.getElementById('timeline-search');
  /* the tracks scroll under a fixed axis: the canvas is the box's height (a canvas tens of
     thousands of pixels tall is not drawn at all), a spacer gives the box its scroll height */
  var total = tracks.reduce(function (s, t) { return s + t.height; }, 20);
  var VIEW_H = Math.min(total, 640);
  box.style.height = VIEW_H + 'px';
  box.style.overflowY = 'auto';
  canvas.style.position = 'sticky';
  canvas.style.top = '0';
  var spacer = document.createElement('div');
  spacer.style.height = (total - VIEW_H) + 'px';
  box.appendChild(canvas);
  box.appendChild(spacer);
  box.addEventListener('scroll', function () { draw(); });
  var api = {lastDrawMs: null, draws: 0, started: true, timing: timing};
  window.perfstackTimeline = api;

  function fmt(us) {
    var a = Math.abs(us);
    if (a === 0) { return '0'; }
    if (a >= 1e6) { return (us / 1e6).toPrecision(3) + ' s'; }
    if (a >= 1e3) { return (us / 1e3).toPrecision(3) + ' ms'; }
    return us.toPrecision(3) + ' µs';
  }
  var colours = {};
  function colour(name) {
    /* a name's colour, the same wherever it is drawn (the page's slices and a chunk's) */
    var c = colours[name];
    if (c === undefined) {
      var h = 0;
      for (var i = 0; i < name.length; i++) { h = (h * 31 + name.charCodeAt(i)) % 360; }
      c = colours[name] = 'hsl(' + h + ',55%,62%)';
    }
    return c;
  }
  function bisect(arr, x) {
    var lo = 0, hi = arr.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (arr[mid] < x) { lo = mid + 1; } else { hi = mid; } }
    return lo;
  }
  function width() { return Math.max(300, box.clientWidth || 900); }
  function xOf(t, w) { return LABEL + (t - view.a) / (view.b - view.a) * (w - LABEL); }
  function tOf(x, w) { return view.a + (x - LABEL) / (w - LABEL) * (view.b - view.a); }

  function drawSlices(g, src, list, top, w, lower, marks) {
    /* one list of slices (the page's of a track, or a chunk's): those in view, one a pixel */
    var from = bisect(src.ts, view.a - src.maxDur), to = bisect(src.ts, view.b);
    var lastX = [];
    for (var i = from; i < to; i++) {
      var d = src.depth[i];
      if (d >= MAX_LANES) { continue; }
      var s = src.ts[i], e = s + src.dur[i];
      if (e < view.a) { continue; }
      var name = list[src.name_id[i]];
      if (marks && src.dur[i] === 0) {  /* an instant (a peak): a marker, named beside it */
        var mx = xOf(s, w), my = top + d * LANE;
        if (mx < LABEL) { continue; }
        g.fillStyle = '#c00';
        g.beginPath(); g.moveTo(mx - 5, my); g.lineTo(mx + 5, my); g.lineTo(mx, my + LANE - 1); g.fill();
        g.fillStyle = '#111';
        var room = g.measureText(name).width;
        g.fillText(name, mx + 7 + room > w ? Math.max(LABEL, mx - 7 - room) : mx + 7, my + LANE / 2);
        continue;
      }
      var x0 = Math.max(LABEL, xOf(s, w)), x1 = Math.min(w, xOf(e, w));
      if (x1 - x0 < 1) {
        if (lastX[d] !== undefined && x0 - lastX[d] < 1) { continue; }  /* one per pixel */
        x1 = x0 + 1;
      }
      lastX[d] = x1;
      var hit = lower && name.toLowerCase().indexOf(lower) >= 0;
      g.fillStyle = lower && !hit ? '#ddd' : colour(name);
      g.fillRect(x0, top + d * LANE, x1 - x0, LANE - 1);
      if (x1 - x0 > 40) {
        g.fillStyle = '#111';
        g.save(); g.beginPath(); g.rect(x0, top + d * LANE, x1 - x0, LANE); g.clip();
        g.fillText(name, x0 + 2, top + d * LANE + LANE / 2);
        g.restore();
      }
    }
  }
  function drawTrack(g, t, y, w, lower) {
    g.fillStyle = '#f3f3f3';
    g.fillRect(0, y, w, HEADER - 2);
    g.fillStyle = '#222';
    g.fillText((t.name + ' · ' + t.group).slice(0, 120), 4, y + 7);
    var top = y + HEADER;
    if (t.kind === 'slices') {
      drawSlices(g, t, names, top, w, lower, t.marks);
      (t.chunks || []).forEach(function (c) {
        if (c.data && c[1] >= view.a && c[0] <= view.b) { drawSlices(g, c.data, c.data.names, top, w, lower, false); }
      });
    } else {
      g.strokeStyle = '#4e79a7'; g.beginPath();
      var first = true;
      for (var j = Math.max(0, bisect(t.ts, view.a) - 1); j < t.ts.length; j++) {
        var cx = xOf(t.ts[j], w), cy = top + COUNTER - 4 - (COUNTER - 8) * t.value[j] / t.top;
        if (first) { g.moveTo(Math.max(LABEL, cx), cy); first = false; } else { g.lineTo(cx, cy); }
        if (t.ts[j] > view.b) { break; }
      }
      g.stroke();
      g.fillStyle = '#555';
      g.fillText('max ' + t.top.toPrecision(4), 4, top + COUNTER / 2);
    }
  }

  function draw() {
    var began = performance.now();
    var w = width(), h = VIEW_H, offset = box.scrollTop;
    var ratio = window.devicePixelRatio || 1;
    if (canvas.width !== w * ratio || canvas.height !== h * ratio) {
      canvas.width = w * ratio; canvas.height = h * ratio;
      canvas.style.width = w + 'px'; canvas.style.height = h + 'px';
    }
    var g = canvas.getContext('2d');
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, w, h);
    g.font = '11px sans-serif';
    g.textBaseline = 'middle';
    var y = 20 - offset, lower = query.toLowerCase();
    g.save(); g.beginPath(); g.rect(0, 20, w, h - 20); g.clip();
    tracks.forEach(function (t) {
      if (y + t.height > 20 && y < h) { drawTrack(g, t, y, w, lower); }
      y += t.height;
    });
    g.restore();
    if (selection) {
      g.fillStyle = 'rgba(30,90,200,0.15)';
      var sx = xOf(selection.a, w), ex = xOf(selection.b, w);
      g.fillRect(Math.max(LABEL, sx), 20, Math.max(1, ex - sx), h - 20);
    }
    /* the axis: ticks at a round step, labelled with as many digits as the step needs */
    g.fillStyle = '#fff';
    g.fillRect(0, 0, w, 20);
    g.fillStyle = '#555';
    var span = view.b - view.a, step = Math.pow(10, Math.floor(Math.log10(span / 5)));
    if (span / step > 10) { step *= 2; }
    if (span / step > 10) { step *= 2.5; }
    var unit = step >= 1e5 ? 1e6 : step >= 100 ? 1e3 : 1;
    var digits = Math.max(0, Math.ceil(-Math.log10(step / unit) - 1e-9));
    var suffix = unit === 1e6 ? ' s' : unit === 1e3 ? ' ms' : ' µs';
    for (var tx = Math.ceil(view.a / step) * step; tx <= view.b; tx += step) {
      var px = xOf(tx, w);
      g.fillRect(px, 12, 1, 6);
      g.fillText((tx / unit).toFixed(digits) + suffix, Math.min(px + 2, w - 70), 7);
    }
    requestDetail(h);
    api.lastDrawMs = performance.now() - began;
    if (!api.draws) {
      api.sinceNavigationMs = performance.now();  /* page load to first draw */
      setTimeout(readNotes, 0);
      drawn();
    }
    api.draws += 1;
    if (status) {
      status.textContent = 'showing ' + fmt(view.b - view.a) + ' from ' + fmt(view.a) +
        (lower ? ' · "' + query + '" highlighted' : '');
    }
  }

  /* the slices too short for the page, in chunks beside it: read when a zoom would show
     them (a left-out slice a pixel wide or more), for the tracks and the time in view */
  window.perfstackTimelineChunk = function (ti, k, packed) {
    var c = tracks[ti] && tracks[ti].chunks && tracks[ti].chunks[k];
    if (!c) { return; }
    c.called = true;
    var read;
    try { read = inflate(packed); } catch (err) { c.failed = 'not a chunk: ' + err; return; }
    read.then(function (data) {
      data.maxDur = 0;
      for (var j = 0; j < data.dur.length; j++) {
        if (data.dur[j] > data.maxDur) { data.maxDur = data.dur[j]; }
        data.ts[j] += tracks[ti].shift || 0;  /* the runs lined up meanwhile */
      }
      c.data = data;
      api.chunksLoaded = (api.chunksLoaded || 0) + 1;
      if (selection) { api.selection = summarise(selection.a, selection.b); showSelection(); }
      draw();
    }).catch(function (err) {
      c.failed = String(err);
      if (selection) { api.selection = summarise(selection.a, selection.b); showSelection(); }
    });
  };
  function requestDetail(h) {
    if (!DATA.chunk_dir || (view.b - view.a) / (width() - LABEL) > DATA.min_dur) { return; }
    var y = 20 - box.scrollTop;
    tracks.forEach(function (t) {
      var shown = y + t.height > 20 && y < h;
      y += t.height;
      if (!shown || !t.chunks) { return; }
      t.chunks.forEach(function (c) {
        if (c[1] >= view.a && c[0] <= view.b) { ask(c); }
      });
    });
  }
  function ask(c) {
    if (c.asked || !DATA.chunk_dir) { return; }
    c.asked = true;
    var tag = document.createElement('script');
    tag.src = DATA.chunk_dir + '/' + c[2];
    function failed(why) {
      c.failed = why;
      if (selection) { api.selection = summarise(selection.a, selection.b); showSelection(); }
    }
    tag.onerror = function () { failed('not found beside the page'); };
    /* a file that ran without handing this chunk over (another's, or garbage) */
    tag.onload = function () { if (!c.called) { failed('its file beside the page does not hold it'); } };
    document.body.appendChild(tag);
  }

  function zoom(factor, at) {
    var span = (view.b - view.a) * factor;
    span = Math.max(span, 0.01);
    var frac = (at - view.a) / (view.b - view.a);
    view.a = at - frac * span; view.b = view.a + span;
    if (view.a < 0) { view.b -= view.a; view.a = 0; }
    if (view.b > end * 1.05) { view.a -= view.b - end * 1.05; view.b = end * 1.05; view.a = Math.max(0, view.a); }
    draw();
  }
  function pan(frac) {
    var shift = (view.b - view.a) * frac;
    view.a += shift; view.b += shift;
    if (view.a < 0) { view.b -= view.a; view.a = 0; }
    draw();
  }

  function trackAt(y) {
    var top = 20 - box.scrollTop;
    for (var i = 0; i < tracks.length; i++) {
      if (y < top + tracks[i].height) { return {track: tracks[i], y: y - top - HEADER}; }
      top += tracks[i].height;
    }
    return null;
  }
  function pick(x, y) {
    var found = trackAt(y), w = width();
    if (!found || found.track.kind !== 'slices' || found.y < 0) { return null; }
    var t = found.track, d = Math.floor(found.y / LANE), at = tOf(x, w);
    var slack = (view.b - view.a) / (w - LABEL);  /* a pixel */
    var best = null;
    [[t, names]].concat((t.chunks || []).filter(function (c) { return c.data; })
      .map(function (c) { return [c.data, c.data.names]; })).forEach(function (pair) {
      var src = pair[0];
      for (var i = bisect(src.ts, at - src.maxDur - slack); i < src.ts.length && src.ts[i] <= at + slack; i++) {
        if (src.depth[i] === d && src.ts[i] - slack <= at && at <= src.ts[i] + src.dur[i] + slack) {
          best = {track: t, src: src, list: pair[1], index: i};
        }
      }
    });
    return best;
  }
  function show(found) {
    picked = found;
    if (!details) { return; }
    details.textContent = '';
    if (!found) { return; }
    var t = found.track, i = found.index, src = found.src || t, list = found.list || names;
    var ti = tracks.indexOf(t);
    var lines = [['slice', list[src.name_id[i]]], ['track', t.name + ' · ' + t.group],
                 ['start', fmt(src.ts[i])], ['duration', fmt(src.dur[i])],
                 ['own time', fmt(src.own[i])], ['depth', String(src.depth[i])]];
    if (src === t && !notes) {
      lines.push(['recorded', 'being read…']);
      readNotes().then(function () { if (picked === found) { show(found); } });
    } else if (src === t) {
      var note = (notes.args[ti] || {})[String(i)];
      if (notes.failed) { lines.push(['recorded', 'could not be read: ' + notes.failed]); }
      if (note !== undefined) { lines.push(['recorded', notes.notes[note]]); }
    }
    lines.forEach(function (pair) {
      var dt = document.createElement('dt'); dt.textContent = pair[0];
      var dd = document.createElement('dd'); dd.textContent = pair[1];
      details.appendChild(dt); details.appendChild(dd);
    });
  }

  /* what each slice's trace recorded (shapes, types, ids): read once, after the first draw
     or at the first click */
  var notesRead = null;
  function readNotes() {
    if (!notesRead) {
      /* they close the page: the page read to its end first */
      var parsed = document.readyState !== 'loading' ? Promise.resolve() : new Promise(function (ok) {
        document.addEventListener('DOMContentLoaded', function () { ok(); });
      });
      notesRead = parsed.then(function () {
        var el = document.getElementById('perfstack-timeline-notes');
        return el ? inflate(el.textContent) : {notes: [], args: []};
      })
        .then(function (got) { notes = got; }, function (err) { notes = {notes: [], args: [], failed: String(err)}; });
    }
    return notesRead;
  }

  function summarise(a, b) {
    /* per slice track: the share of [a, b] covered by its top-level slices, and the names
       with the most own time inside it (each slice's own time pro rata of its overlap), over
       the page's slices and the detail read from beside it; ``partial`` where detail in the
       range is not read (yet) */
    var out = [];
    tracks.forEach(function (t) {
      if (t.kind !== 'slices') { return; }
      var spans = [], byName = {}, partial = false, missing = false;
      var sources = [[t, names]];
      (t.chunks || []).forEach(function (c) {
        if (c[1] < a || c[0] > b) { return; }
        if (c.data) { sources.push([c.data, c.data.names]); }
        else if (c.failed) { missing = true; } else { partial = true; }
      });
      sources.forEach(function (pair) {
        var src = pair[0], list = pair[1];
        for (var i = bisect(src.ts, a - src.maxDur); i < src.ts.length && src.ts[i] < b; i++) {
          var s = Math.max(a, src.ts[i]), e = Math.min(b, src.ts[i] + src.dur[i]);
          if (e <= s) { continue; }
          if (src.depth[i] === 0) { spans.push([s, e]); }
          var own = src.dur[i] > 0 ? src.own[i] * (e - s) / src.dur[i] : 0;
          var n = list[src.name_id[i]];
          byName[n] = (byName[n] || 0) + own;
        }
      });
      spans.sort(function (x, y) { return x[0] - y[0]; });
      var busy = 0, reach = a;
      spans.forEach(function (sp) {
        var from = Math.max(sp[0], reach);
        if (sp[1] > from) { busy += sp[1] - from; reach = sp[1]; }
      });
      var top = Object.keys(byName).sort(function (x, y) { return byName[y] - byName[x]; })
        .slice(0, 5).map(function (n) { return [n, byName[n]]; });
      out.push({track: t.name, group: t.group, busy: b > a ? busy / (b - a) : 0, top: top,
                partial: partial, missing: missing});
    });
    return out;
  }
  function showSelection() {
    if (!summary) { return; }
    summary.textContent = '';
    if (!selection) { return; }
    var head = document.createElement('p');
    head.textContent = 'selected ' + fmt(selection.b - selection.a) + ' from ' + fmt(selection.a);
    summary.appendChild(head);
    var table = document.createElement('table');
    var tr = document.createElement('tr');
    ['track', 'busy', 'most own time in the selection'].forEach(function (h) {
      var th = document.createElement('th'); th.textContent = h; tr.appendChild(th);
    });
    table.appendChild(tr);
    api.selection.forEach(function (row) {
      var r = document.createElement('tr');
      [row.track + ' · ' + row.group, (100 * row.busy).toFixed(1) + '%' + (row.missing ? ' (its detail beside the page could not be read)' : row.partial ? ' (detail being read)' : ''),
       row.top.map(function (p) { return p[0] + ' ' + fmt(p[1]); }).join(', ')].forEach(function (c) {
        var td = document.createElement('td'); td.textContent = c; r.appendChild(td);
      });
      table.appendChild(r);
    });
    summary.appendChild(table);
  }
  function select(a, b) {
    selection = {a: Math.min(a, b), b: Math.max(a, b)};
    tracks.forEach(function (t) {  /* the detail in the range, read for the figures */
      (t.chunks || []).forEach(function (c) {
        if (c[1] >= selection.a && c[0] <= selection.b) { ask(c); }
      });
    });
    api.selection = summarise(selection.a, selection.b);
    showSelection();
    draw();
    return api.selection;
  }

  var drag = null;
  canvas.addEventListener('mousedown', function (e) {
    var r = canvas.getBoundingClientRect();
    drag = {x: e.clientX - r.left, y: e.clientY - r.top, a: view.a, b: view.b, shift: e.shiftKey, moved: false};
  });
  window.addEventListener('mousemove', function (e) {
    if (!drag) { return; }
    var r = canvas.getBoundingClientRect(), x = e.clientX - r.left, w = width();
    if (Math.abs(x - drag.x) > 3) { drag.moved = true; }
    if (!drag.moved) { return; }
    if (drag.shift) {
      selection = {a: Math.min(tOf(drag.x, w), tOf(x, w)), b: Math.max(tOf(drag.x, w), tOf(x, w))};
      draw();
    } else {
      var shift = (drag.x - x) / (w - LABEL) * (drag.b - drag.a);
      view.a = Math.max(0, drag.a + shift); view.b = view.a + (drag.b - drag.a);
      draw();
    }
  });
  window.addEventListener('mouseup', function (e) {
    if (!drag) { return; }
    var r = canvas.getBoundingClientRect();
    if (!drag.moved) { show(pick(drag.x, drag.y)); }
    else if (drag.shift && selection) { select(selection.a, selection.b); }
    drag = null;
  });
  canvas.addEventListener('wheel', function (e) {
    e.preventDefault();
    var r = canvas.getBoundingClientRect();
    zoom(e.deltaY > 0 ? 1.25 : 0.8, tOf(e.clientX - r.left, width()));
  }, {passive: false});
  canvas.addEventListener('keydown', function (e) {
    var mid = (view.a + view.b) / 2;
    if (e.key === 'w') { zoom(0.8, mid); } else if (e.key === 's') { zoom(1.25, mid); }
    else if (e.key === 'a') { pan(-0.2); } else if (e.key === 'd') { pan(0.2); }
    else if (e.key === '0') { view = {a: home.a, b: home.b}; draw(); }
    else if (e.key === '9') { view = {a: 0, b: end}; draw(); } else { return; }
    e.preventDefault();
  });
  if (search) {
    search.addEventListener('input', function () {
      query = search.value.trim();
      var count = 0, lower = query.toLowerCase();
      if (lower) {
        tracks.forEach(function (t) {
          if (t.kind !== 'slices') { return; }
          t.name_id.forEach(function (id) { if (names[id].toLowerCase().indexOf(lower) >= 0) { count += 1; } });
        });
      }
      api.matches = count;
      draw();
      if (status && lower) { status.textContent += ' · ' + count + ' slices match'; }
    });
  }
  var reset = document.getElementById('timeline-reset');
  if (reset) { reset.addEventListener('click', function () { view = {a: home.a, b: home.b}; selection = null; showSelection(); draw(); }); }

  api.find = function (name) {
    /* highlight the slices of this name (or holding it) and zoom to the first, with its
       track scrolled into view; the number found */
    var lower = String(name).toLowerCase(), first = {}, top = 20;
    tracks.forEach(function (t) {
      if (t.kind === 'slices') {
        for (var i = 0; i < t.ts.length; i++) {
          var n = names[t.name_id[i]], how = n === name ? 'exact' : n.toLowerCase().indexOf(lower) >= 0 ? 'holds' : null;
          if (how && (!first[how] || t.ts[i] < first[how].t.ts[first[how].i])) {
            first[how] = {t: t, i: i, top: top};
          }
        }
      }
      top += t.height;
    });
    var exact = first.exact || first.holds || null;
    if (search) { search.value = name; }
    query = name;
    api.matches = 0;
    tracks.forEach(function (t) {
      if (t.kind !== 'slices') { return; }
      t.name_id.forEach(function (id) { if (names[id].toLowerCase().indexOf(lower) >= 0) { api.matches += 1; } });
    });
    if (exact) {
      var s = exact.t.ts[exact.i], d = Math.max(exact.t.dur[exact.i], 0.01);
      view = {a: Math.max(0, s - d), b: s + 2 * d};
      box.scrollTop = Math.max(0, exact.top - 40);
      show({track: exact.t, src: exact.t, list: names, index: exact.i});
    }
    seen = true;
    draw();
    return api.matches;
  };
  api.goStep = function (group, k) {
    /* the k-th profiled step (1-based, in the order the trace recorded its ProfilerStep
       ranges) of the first run whose name begins with `group` (any run's where none does):
       zoomed to with a margin, selected (what ran in it summed) and its range shown; the
       step's start (µs), or null where that run recorded fewer steps */
    var runs = {}, order = [];
    tracks.forEach(function (t, ti) {
      if (t.kind !== 'slices') { return; }
      for (var i = 0; i < t.ts.length; i++) {
        if (t.depth[i] === 0 && names[t.name_id[i]].indexOf('ProfilerStep#') === 0) {
          if (!runs[t.group]) { runs[t.group] = []; order.push(t.group); }
          runs[t.group].push({t: t, i: i, ti: ti});
        }
      }
    });
    var mine = order.filter(function (g) { return g.indexOf(group) === 0; });
    var steps = runs[(mine.length ? mine : order)[0]] || [];
    steps.sort(function (x, y) { return x.t.ts[x.i] - y.t.ts[y.i]; });
    var s = steps[k - 1];
    if (!s) {
      show(null);
      if (details) {
        details.textContent = 'step ' + k + ': the timeline has ' + steps.length +
          ' profiled step ranges (ProfilerStep#N) of this run, not ' + k;
      }
      seen = true;
      draw();
      return null;
    }
    var a = s.t.ts[s.i], b = a + s.t.dur[s.i], pad = Math.max((b - a) * 0.05, 0.01);
    view = {a: Math.max(0, a - pad), b: b + pad};
    var top = 20;  /* the run's first track (its steps, as the workload marked them) in view */
    for (var j = 0; j < s.ti && tracks[j].group !== s.t.group; j++) { top += tracks[j].height; }
    box.scrollTop = Math.max(0, top - 20);
    select(a, b);
    show({track: s.t, src: s.t, list: names, index: s.i});
    seen = true;
    draw();
    return a;
  };
  /* each run's own clock starts at its workload's start: lined up, every run's step k starts
     where the first run's does (its tracks moved as a whole) */
  tracks.forEach(function (t) { t.shift = 0; });
  function stepStart(group, k) {
    /* where a run's step k starts: its steps track's 'step k' (a run perfstack started), else
       torch's 'ProfilerStep#k' range (a trace recorded elsewhere: a job's rank) */
    var mine = tracks.filter(function (t) { return t.group === group && t.kind === 'slices'; });
    var steps = mine.filter(function (t) { return t.name.indexOf('steps') === 0; })[0];
    var want = steps ? 'step ' + k : 'ProfilerStep#' + k, found = null;
    (steps ? [steps] : mine).forEach(function (t) {
      for (var i = 0; i < t.ts.length; i++) {
        if (t.depth[i] === 0 && names[t.name_id[i]] === want && (found === null || t.ts[i] < found)) {
          found = t.ts[i];
        }
      }
    });
    return found;
  }
  function lineUp(k) {
    /* k: the step to line up at (0: each run on its own clock); the runs that marked it */
    var groups = [], orig = {}, ref = null;
    tracks.forEach(function (t) { if (groups.indexOf(t.group) < 0) { groups.push(t.group); } });
    groups.forEach(function (g) {
      var s = k ? stepStart(g, k) : null;
      orig[g] = s === null ? null : s - shiftOf(g);
      if (orig[g] !== null && (ref === null || orig[g] > ref)) { ref = orig[g]; }
    });
    tracks.forEach(function (t) {
      var want = ref !== null && orig[t.group] !== null ? ref - orig[t.group] : 0;
      var by = want - t.shift;
      if (by) {
        for (var i = 0; i < t.ts.length; i++) { t.ts[i] += by; }
        (t.chunks || []).forEach(function (c) {
          c[0] += by; c[1] += by;
          if (c.data) { for (var j = 0; j < c.data.ts.length; j++) { c.data.ts[j] += by; } }
        });
      }
      t.shift = want;
    });
    end = 0;
    tracks.forEach(function (t) {
      for (var i = 0; i < t.ts.length; i++) {
        var e = t.ts[i] + (t.dur ? t.dur[i] : 0);
        if (e > end) { end = e; }
      }
    });
    draw();
    return groups.filter(function (g) { return orig[g] !== null; }).length;
  }
  function shiftOf(group) {
    var t = tracks.filter(function (x) { return x.group === group; })[0];
    return t ? t.shift : 0;
  }
  var lineupBox = document.getElementById('timeline-lineup-box');
  var lineupOn = document.getElementById('timeline-lineup');
  var lineupStep = document.getElementById('timeline-step');
  var withSteps = {};
  tracks.forEach(function (t) {
    if (t.kind !== 'slices') { return; }
    if (t.name.indexOf('steps') === 0 || t.name_id.some(function (id) { return names[id].indexOf('ProfilerStep#') === 0; })) {
      withSteps[t.group] = true;
    }
  });
  if (lineupBox && Object.keys(withSteps).length < 2) { lineupBox.hidden = true; }
  function relineUp() { lineUp(lineupOn.checked ? Math.max(1, parseInt(lineupStep.value, 10) || 1) : 0); }
  if (lineupOn) { lineupOn.addEventListener('change', relineUp); lineupStep.addEventListener('change', relineUp); }
  api.lineUp = lineUp;
  api.stepStarts = function (k) {
    /* where each run's step k starts now, in the order of the runs */
    var groups = [];
    tracks.forEach(function (t) { if (groups.indexOf(t.group) < 0) { groups.push(t.group); } });
    return groups.map(function (g) { return stepStart(g, k); }).filter(function (s) { return s !== null; });
  };
  api.laneY = function (trackName, depth) {
    /* where on the canvas a track's lane is drawn (the middle of it), or null */
    var top = 20 - box.scrollTop;
    for (var i = 0; i < tracks.length; i++) {
      if (tracks[i].name === trackName) { return top + HEADER + depth * LANE + LANE / 2; }
      top += tracks[i].height;
    }
    return null;
  };
  api.view = function () { return {a: view.a, b: view.b, end: end}; };
  api.setView = function (a, b) { view = {a: a, b: b}; draw(); return api.lastDrawMs; };
  api.zoom = function (factor) { zoom(factor, (view.a + view.b) / 2); return api.lastDrawMs; };
  api.select = select;
  api.pick = function (x, y) { var f = pick(x, y); show(f); return f ? f.list[f.src.name_id[f.index]] : null; };
  api.draw = draw;
  api.visible = function () { return !document.getElementById('pane-timeline').hidden; };
  /* drawn when its pane is first shown (a hidden canvas has no width) */
  var seen = false;
  function maybe() {
    if (!seen && api.visible()) { seen = true; draw(); }
  }
  window.addEventListener('hashchange', maybe);
  document.addEventListener('click', function () { setTimeout(maybe, 0); });
  window.addEventListener('resize', function () { if (api.visible()) { draw(); } });
  maybe();
  if (pending !== null) { api[pending.what].apply(null, pending.args); pending = null; }
  }
})();
