/* perfstack's HTML report: panes, sortable and searchable tables, a zoomable flame graph.
   Plain JavaScript, no library, nothing fetched. Every workload string arrives as JSON data
   and is written with textContent, never as markup. */
(function () {
  'use strict';
  var errors = [];
  window.addEventListener('error', function (e) {
    errors.push(String(e.message));
    document.body.setAttribute('data-errors', errors.join(' | '));
  });
  /* the page's data (its tables and flame graph), parsed in init() */
  var DATA = null;
  var tables = {};

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    if (attrs) { Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); }); }
    if (text !== undefined && text !== null) { node.textContent = text; }
    return node;
  }

  /* ---- panes ---------------------------------------------------------------------------- */
  function reveal(id) {
    /* the pane shown, the others hidden, its tab selected; null when there is none */
    var found = null;
    document.querySelectorAll('.pane').forEach(function (p) {
      p.hidden = p.id !== id;
      if (p.id === id) { found = p; }
    });
    if (!found) { return null; }
    document.querySelectorAll('nav.tabs a').forEach(function (a) {
      a.setAttribute('aria-selected', a.getAttribute('href') === '#' + id ? 'true' : 'false');
    });
    if (history.replaceState) { history.replaceState(null, '', '#' + id); }
    return found;
  }
  function showPane(id) {
    init();
    var pane = reveal(id);
    if (!pane) { return showPane('pane-overview'); }
    layOut(pane);
    return true;
  }
  function layOut(pane) {
    /* a pane's tables are laid out when it is first shown: a page opened on one pane (a
       job's Timeline) does not lay out the others' rows before it draws */
    if (pane.id === 'pane-python' && flame) { flame.draw(); }
    Object.keys(tables).forEach(function (tid) {
      if (!tables[tid].drawn && pane.contains(tables[tid].box)) { tables[tid].render(); }
    });
  }
  function follow(pane, table, filter, step) {
    /* show a pane and search its table (every table of the pane when none is named); the
       timeline finds its slices of that name, or goes to a run's profiled step */
    showPane(pane);
    if (pane === 'pane-timeline' && window.perfstackTimeline) {
      if (step) {
        window.perfstackTimeline.goStep(step.group, step.k);
      } else {
        window.perfstackTimeline.find(filter);
      }
      return;
    }
    var targets = table ? [table] : Object.keys(tables).filter(function (id) {
      return document.getElementById(pane).contains(tables[id].box);
    });
    targets.forEach(function (id, i) {
      if (!tables[id]) { return; }
      tables[id].search(filter);
      if (i === 0) { tables[id].box.scrollIntoView({block: 'start'}); }
    });
  }
  window.addEventListener('hashchange', function () {
    var id = location.hash.slice(1);
    if (document.getElementById(id) && document.getElementById(id).classList.contains('pane')) {
      showPane(id);
    }
  });
  document.addEventListener('click', function (e) {
    var tab = e.target.closest ? e.target.closest('nav.tabs a') : null;
    if (tab) { e.preventDefault(); showPane(tab.getAttribute('href').slice(1)); return; }
    var a = e.target.closest ? e.target.closest('a[data-pane]') : null;
    if (!a) { return; }
    e.preventDefault();
    var k = parseInt(a.getAttribute('data-step') || '', 10);
    follow(a.getAttribute('data-pane'), a.getAttribute('data-table'),
           a.getAttribute('data-filter') || '',
           k > 0 ? {k: k, group: a.getAttribute('data-group') || ''} : null);
  });

  /* ---- tables --------------------------------------------------------------------------- */
  var PAGE = 100;
  function cellValue(cell) { return Array.isArray(cell) ? cell[0] : cell; }
  function cellText(cell) { return Array.isArray(cell) ? cell[1] : (cell === null ? '' : cell); }

  function Table(box, spec) {
    this.box = box; this.spec = spec; this.query = ''; this.limit = PAGE;
    this.sortCol = spec.sort !== undefined ? spec.sort : -1; this.desc = true;
    this.grouped = false;
    var self = this;
    var bar = el('div', {'class': 'toolbar'});
    this.input = el('input', {type: 'search', placeholder: 'search ' + spec.title,
                              'aria-label': 'search ' + spec.title, 'data-role': 'search'});
    this.input.addEventListener('input', function () { self.query = self.input.value; self.limit = PAGE; self.render(); });
    bar.appendChild(this.input);
    if (spec.group) {
      var label = el('label');
      this.groupBox = el('input', {type: 'checkbox', 'data-role': 'group'});
      this.groupBox.addEventListener('change', function () { self.grouped = self.groupBox.checked; self.render(); });
      label.appendChild(this.groupBox);
      label.appendChild(document.createTextNode(' ' + spec.group));
      bar.appendChild(label);
    }
    this.count = el('span', {'class': 'count'});
    bar.appendChild(this.count);
    box.appendChild(bar);
    this.holder = el('div', {'class': 'scroll'});
    box.appendChild(this.holder);
    this.more = el('button', {'class': 'more', type: 'button'}, 'show more');
    this.more.addEventListener('click', function () { self.limit += PAGE * 5; self.render(); });
    box.appendChild(this.more);
    this.drawn = false;  /* rendered when its pane is first shown (showPane) */
  }
  Table.prototype.search = function (text) {
    this.input.value = text; this.query = text; this.limit = PAGE; this.render();
  };
  Table.prototype.rows = function () {
    var spec = this.spec, rows = spec.rows;
    if (this.grouped) {
      var groups = {}, order = [];
      rows.forEach(function (r) {
        var g = groups[r.g];
        if (!g) {
          /* text columns (callers, ISA) as the group's first row has them */
          g = groups[r.g] = {c: spec.columns.map(function (col, i) {
            return i === 0 ? r.g : (col.sum ? [0, ''] : (col.num ? [null, ''] : r.c[i]));
          }), k: r.g, n: 0};
          order.push(g);
        }
        g.n += 1;
        spec.columns.forEach(function (col, i) {
          if (col.sum && cellValue(r.c[i]) !== null) { g.c[i] = [g.c[i][0] + cellValue(r.c[i]), null]; }
        });
      });
      order.forEach(function (g) {
        spec.columns.forEach(function (col, i) {
          if (col.sum) { g.c[i] = [g.c[i][0], fmt(g.c[i][0], col.unit)]; }
        });
        g.c[0] = g.c[0] + ' (' + g.n + ' shapes)';
      });
      rows = order;
    }
    var q = this.query.trim().toLowerCase();
    if (q) {
      rows = rows.filter(function (r) {
        return r.c.some(function (c) { return String(cellText(c)).toLowerCase().indexOf(q) >= 0; }) ||
          (r.k && String(r.k).toLowerCase().indexOf(q) >= 0);
      });
    }
    var col = this.sortCol, desc = this.desc;
    if (col >= 0) {
      rows = rows.slice().sort(function (a, b) {
        var x = cellValue(a.c[col]), y = cellValue(b.c[col]);
        if (x === null || x === undefined || x === '') { return 1; }
        if (y === null || y === undefined || y === '') { return -1; }
        var r = (typeof x === 'number' && typeof y === 'number') ? x - y
          : String(x).localeCompare(String(y));
        return desc ? -r : r;
      });
    }
    return rows;
  };
  Table.prototype.render = function () {
    this.drawn = true;
    var self = this, spec = this.spec, rows = this.rows();
    var table = el('table', {'data-table': spec.id});
    var head = el('tr');
    spec.columns.forEach(function (col, i) {
      var th = el('th', col.num ? {'class': 'num'} : {});
      if (i === self.sortCol) { th.setAttribute('aria-sort', self.desc ? 'descending' : 'ascending'); }
      var attrs = {type: 'button', 'data-col': String(i)};
      if (col.name && col.name !== col.title) { attrs.title = col.name + ' in the JSON report'; }
      var b = el('button', attrs, col.title);
      b.addEventListener('click', function () {
        if (self.sortCol === i) { self.desc = !self.desc; } else { self.sortCol = i; self.desc = !!col.num; }
        self.render();
      });
      th.appendChild(b);
      head.appendChild(th);
    });
    var thead = el('thead'); thead.appendChild(head); table.appendChild(thead);
    var body = el('tbody');
    rows.slice(0, this.limit).forEach(function (r) {
      var tr = el('tr', {'data-key': r.k || ''});
      r.c.forEach(function (cell, i) {
        var col = spec.columns[i];
        tr.appendChild(el('td', {'class': col.num ? 'num' : (i === 0 ? 'name' : '')},
                          cellText(cell)));
      });
      body.appendChild(tr);
      if (r.d && r.d.length && !self.grouped) {
        tr.className = 'clickable';
        tr.title = 'click for its links';
        tr.addEventListener('click', function () { toggleDetail(tr, r.d, spec.columns.length); });
      }
    });
    table.appendChild(body);
    this.holder.textContent = '';
    this.holder.appendChild(table);
    var total = this.grouped ? rows.length : spec.rows.length;
    this.count.textContent = Math.min(rows.length, this.limit) + ' of ' + rows.length +
      (rows.length !== total ? ' matching (' + total + ')' : '') + ' rows';
    this.more.hidden = rows.length <= this.limit;
  };
  function toggleDetail(tr, details, span) {
    var next = tr.nextSibling;
    if (next && next.className === 'detail') { next.remove(); return; }
    var row = el('tr', {'class': 'detail'}), td = el('td', {colspan: String(span)});
    var none = true;
    details.forEach(function (d) {
      var links = d.links.filter(function (l) { return document.getElementById(l.pane); });
      if (!links.length) { return; }
      none = false;
      var line = el('div');
      line.appendChild(el('b', null, d.label + ': '));
      links.forEach(function (l, i) {
        if (i) { line.appendChild(document.createTextNode(', ')); }
        var a = el('a', {href: '#' + l.pane, 'data-pane': l.pane, 'data-table': l.table,
                         'data-filter': l.filter}, l.text);
        line.appendChild(a);
      });
      td.appendChild(line);
    });
    if (none) { td.appendChild(el('span', {'class': 'muted'}, 'nothing to follow from it in this page')); }
    row.appendChild(td);
    tr.parentNode.insertBefore(row, tr.nextSibling);
  }
  function fmt(v, unit) {
    if (v === null || v === undefined) { return ''; }
    if (unit === 's') {
      var a = Math.abs(v);
      if (a >= 1) { return v.toFixed(a >= 100 ? 0 : 2) + ' s'; }
      if (a >= 1e-3) { return (v * 1e3).toFixed(a >= 0.1 ? 0 : 1) + ' ms'; }
      return (v * 1e6).toFixed(1) + ' µs';
    }
    return (Math.abs(v) >= 1000 ? Math.round(v).toLocaleString('en') : String(+v.toPrecision(4))) +
      (unit && unit !== 'count' ? ' ' + unit : '');
  }

  /* ---- flame graph ---------------------------------------------------------------------- */
  var IMPORT = /(<frozen importlib|importlib\/_bootstrap|^_find_and_load|^_call_with_frames_removed)/;
  function isImport(node) { return IMPORT.test(node.n); }
  function foldImports(node) {
    /* a run of import-machinery frames becomes one "[import machinery]" frame whose children
       are the first frames below it that are not import machinery, merged by name */
    var out = {n: node.n, v: node.v, g: node.g, o: node.o, c: []};
    var merged = {};
    function add(child) {
      var key = child.n, have = merged[key];
      if (!have) { merged[key] = child; out.c.push(child); return; }
      have.v += child.v; have.g += child.g;
      child.c.forEach(function (cc) { have.c.push(cc); });
    }
    node.c.forEach(function (child) {
      if (isImport(child) && !isImport(node)) {
        var fold = {n: '[import machinery]', v: 0, g: 0, o: false, c: []};
        (function collect(n) {
          n.c.forEach(function (cc) {
            if (isImport(cc)) { collect(cc); } else { fold.c.push(foldImports(cc)); }
          });
        })(child);
        fold.v = child.v; fold.g = child.g;
        /* each module it imported becomes one frame, "import torch/__init__.py": the
           machinery between two imports is not shown twice */
        var rest = [];
        fold.c.forEach(function (cc) {
          var m = /^<module> \((.*?)(:\d+)?\)$/.exec(cc.n);
          if (m) { cc.n = 'import ' + m[1]; add(cc); fold.v -= cc.v; fold.g -= cc.g; }
          else { rest.push(cc); }
        });
        fold.c = rest;
        if (fold.v > 1e-9 || rest.length) { add(fold); }
      } else {
        add(foldImports(child));
      }
    });
    return out;
  }

  function Flame(box, tree) {
    this.box = box; this.raw = tree; this.folded = foldImports(tree);
    this.fold = true; this.root = null; this.query = '';
    var self = this;
    var bar = el('div', {'class': 'toolbar'});
    this.input = el('input', {type: 'search', placeholder: 'search the flame graph',
                              'aria-label': 'search the flame graph', 'data-role': 'flame-search'});
    this.input.addEventListener('input', function () { self.query = self.input.value; self.draw(); });
    var reset = el('button', {type: 'button', 'data-role': 'flame-reset'}, 'reset zoom');
    reset.addEventListener('click', function () { self.root = null; self.draw(); });
    var label = el('label');
    var cb = el('input', {type: 'checkbox', 'data-role': 'flame-fold'});
    cb.checked = true;
    cb.addEventListener('change', function () { self.fold = cb.checked; self.root = null; self.draw(); });
    label.appendChild(cb); label.appendChild(document.createTextNode(' fold import machinery'));
    this.status = el('span', {'class': 'count', 'data-role': 'flame-status'});
    [this.input, reset, label, this.status].forEach(function (n) { bar.appendChild(n); });
    box.appendChild(bar);
    this.canvas = el('div', {'class': 'flame', id: 'flamegraph', role: 'img',
                             'aria-label': 'flame graph of the Python stacks'});
    box.appendChild(this.canvas);
    box.appendChild(el('p', {'class': 'legend'},
      'Callers above callees; width is time; click a frame to zoom, "reset zoom" to go back. ' +
      (DATA.flameGil ? 'Red: most samples held the GIL; blue: most released it (native code). '
        : 'No GIL profile in this report: one colour. ') +
      'Bold outline: a search match; saturated: your own code.'));
  }
  Flame.prototype.tree = function () { return this.fold ? this.folded : this.raw; };
  Flame.prototype.draw = function () {
    var self = this, top = this.tree(), root = this.root || top;
    var width = this.canvas.clientWidth || 800, rowH = 18;
    var q = this.query.trim().toLowerCase();
    this.canvas.textContent = '';
    var path = [], maxDepth = 0, matched = 0, cells = [];
    (function find(n, trail) {  /* the ancestors of the zoom root, drawn full width above it */
      if (n === root) { path = trail; return true; }
      return n.c.some(function (c) { return find(c, trail.concat([n])); });
    })(top, []);
    path.forEach(function (n, depth) { cells.push([n, depth, 0, 1, true]); });
    (function layout(n, depth, x0, share) {
      cells.push([n, depth, x0, share, false]);
      var x = x0;
      n.c.slice().sort(function (a, b) { return b.v - a.v; }).forEach(function (c) {
        var s = n.v ? share * c.v / n.v : 0;
        if (s * width >= 1) { layout(c, depth + 1, x, s); }
        x += s;
      });
    })(root, path.length, 0, 1);
    var counted = [];
    cells.forEach(function (cell) {
      var n = cell[0], depth = cell[1];
      maxDepth = Math.max(maxDepth, depth);
      var d = el('div', {title: n.n + ': ' + fmt(n.v, 's') + ', ' +
        (top.v ? (100 * n.v / top.v).toFixed(1) : '0') + '% of all samples' +
        (n.v ? ', GIL held in ' + (100 * n.g / n.v).toFixed(0) + '%' : '')}, cell[3] * width > 30 ? n.n : '');
      var gil = n.v ? n.g / n.v : 0;
      var hue = !DATA.flameGil ? 35 : (gil >= 0.5 ? 8 + 20 * (1 - gil) : 205);
      d.style.background = 'hsl(' + hue + ',' + (n.o ? 75 : 45) + '%,' + (cell[4] ? 82 : 66) + '%)';
      d.style.left = (100 * cell[2]) + '%';
      d.style.width = (100 * cell[3]) + '%';
      d.style.top = (depth * rowH) + 'px';
      if (q && n.n.toLowerCase().indexOf(q) >= 0) {
        d.className = 'match';
        if (!cell[4] && !counted.some(function (a) { return contains(a, n); })) {
          counted.push(n); matched += n.v;
        }
      } else if (q) { d.className = 'dim'; }
      d.addEventListener('click', function () { self.root = n === self.root ? null : n; self.draw(); });
      self.canvas.appendChild(d);
    });
    this.canvas.style.height = ((maxDepth + 1) * rowH + 2) + 'px';
    this.status.textContent = q ? 'matches: ' + (root.v ? (100 * matched / root.v).toFixed(1) : '0') +
      '% of ' + (this.root ? 'this frame' : 'all samples') : (this.root ? 'zoomed: ' + root.n : '');
    this.canvas.setAttribute('data-zoomed', this.root ? '1' : '0');
  };
  function contains(a, b) { return a === b || a.c.some(function (c) { return contains(c, b); }); }

  /* ---- call tree ------------------------------------------------------------------------ */
  function CallTree(box, tree) {
    var total = tree.v || 1;
    function item(n) {
      var li = el('li');
      var kids = n.c.slice().sort(function (a, b) { return (b.o - a.o) || (b.v - a.v); })
        .filter(function (c) { return c.v / total >= 0.001; });
      var toggle = el('span', {'class': 'toggle', 'data-role': 'tree-toggle'}, kids.length ? '▸' : ' ');
      li.appendChild(toggle);
      li.appendChild(el('span', {'class': n.o ? 'ours' : 'lib'}, n.n));
      li.appendChild(el('span', {'class': 'fig'}, fmt(n.v, 's') + ', ' +
        (100 * n.v / total).toFixed(1) + '%' + (n.v ? ', GIL ' + (100 * n.g / n.v).toFixed(0) + '%' : '')));
      if (kids.length) {
        var open = false, ul = null;
        toggle.addEventListener('click', function () {
          open = !open; toggle.textContent = open ? '▾' : '▸';
          if (open && !ul) { ul = el('ul', {'class': 'tree'}); kids.forEach(function (c) { ul.appendChild(item(c)); }); li.appendChild(ul); }
          if (ul) { ul.hidden = !open; }
        });
      }
      return li;
    }
    var ul = el('ul', {'class': 'tree', id: 'call-tree'});
    foldImports(tree).c.forEach(function (c) { ul.appendChild(item(c)); });
    box.appendChild(ul);
  }

  /* ---- start ---------------------------------------------------------------------------- */
  var flame = null, initialised = false, loaded = false;
  var api = {showPane: showPane, tables: tables, flame: null};
  window.perfstackReport = api;
  function ready() {
    if (!initialised || !loaded) { return; }
    document.body.setAttribute('data-charts', String(document.querySelectorAll('svg.chart, .flame').length));
    document.body.setAttribute('data-ready', '1');
  }
  function init() {
    /* the tables and the flame graph, once the page is read (their data follows this
       script): at once, or, on a page opened on its Timeline, once the timeline has drawn
       (the first thing a job's page shows waits for nothing else) */
    if (initialised) { return; }
    if (document.readyState === 'loading') {
      document.addEventListener('DOMContentLoaded', init);
      return;
    }
    initialised = true;
    DATA = JSON.parse(document.getElementById('perfstack-data').textContent);
    Object.keys(DATA.tables || {}).forEach(function (id) {
      var box = document.getElementById('table-' + id);
      if (box) { tables[id] = new Table(box, DATA.tables[id]); }
    });
    if (DATA.flame) {
      var fbox = document.getElementById('flame-box');
      if (fbox) { flame = new Flame(fbox, DATA.flame); }
      var tbox = document.getElementById('tree-box');
      if (tbox) { CallTree(tbox, DATA.flame); }
    }
    api.flame = flame;
    var shown = document.querySelector('.pane:not([hidden])');  /* shown before: lay it out */
    if (shown) { layOut(shown); }
    api.readyMs = performance.now();  /* (a test reads when, against the timeline's draw) */
    ready();
  }
  window.addEventListener('resize', function () { if (flame) { flame.draw(); } });
  window.addEventListener('load', function () { loaded = true; ready(); });
  var first = (location.hash || '#pane-overview').slice(1);
  if (first === 'pane-timeline' && document.getElementById('timeline-box') && reveal(first)) {
    document.addEventListener('perfstack-timeline-drawn', init);
    setTimeout(init, 2000);  /* should the timeline never say it drew */
  } else if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', function () { showPane(first); });
  } else {
    showPane(first);
  }
})();
