// The report's timeline zooms and pans: its lanes are drawn in milliseconds since the
// history's first event, so a view is the lanes' viewBox; only the axis and the labels
// (faults, tokens) are placed again. Links to an overlap or a time zoom to it.
(() => {
  const tl = document.getElementById('timeline');
  if (!tl) return;
  const SVG = 'http://www.w3.org/2000/svg';
  const lanes = tl.querySelector('svg.lanes');
  const axis = tl.querySelector('g.axis');
  const labels = [...tl.querySelectorAll('g.labels text')];
  const range = document.getElementById('tl-range');
  const span = Number(tl.dataset.span), x0 = Number(tl.dataset.x0), width = Number(tl.dataset.w);
  const height = lanes.viewBox.baseVal.height, axisTop = Number(tl.dataset.axis), bottom = Number(tl.dataset.bottom);
  const maxLabels = Number(tl.dataset.maxLabels);
  // A capped timeline (data-from, data-to) opens on the stretch it draws.
  let from = Number(tl.dataset.from || 0), to = Number(tl.dataset.to || span);

  const niceStep = (raw) => {
    const power = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5]) if (m * power >= raw) return m * power;
    return 10 * power;
  };
  const seconds = (ms) => (Math.round(ms * 1e3) / 1e6) + 's';
  const place = (ms) => x0 + (ms - from) / (to - from) * width;

  function draw() {
    lanes.setAttribute('viewBox', `${from} 0 ${to - from} ${height}`);
    axis.replaceChildren();
    const step = niceStep((to - from) / 8);
    for (let i = Math.ceil(from / step); i * step <= to; i++) {
      const x = place(i * step);
      const line = document.createElementNS(SVG, 'line');
      for (const [k, v] of [['x1', x], ['x2', x], ['y1', axisTop], ['y2', bottom]]) line.setAttribute(k, v);
      const text = document.createElementNS(SVG, 'text');
      text.setAttribute('x', x);
      text.setAttribute('y', axisTop - 6);
      text.textContent = seconds(i * step);
      axis.append(line, text);
    }
    // A label is in view while its time is, or, for a fault, while any of it is.
    const inView = (l) => Number(l.dataset.t) <= to && Number(l.dataset.end || l.dataset.t) >= from;
    const tokens = labels.filter((l) => l.parentNode.classList.contains('tokens') && inView(l)).length;
    tl.querySelector('g.tokens').classList.toggle('hidden', tokens > maxLabels);
    for (const l of labels) {
      const shown = inView(l) && (tokens <= maxLabels || !l.parentNode.classList.contains('tokens'));
      l.style.display = shown ? '' : 'none';
      if (shown) l.setAttribute('x', Math.max(place(Number(l.dataset.t)), x0));
    }
    range.textContent = `showing ${seconds(from)} .. ${seconds(to)} of ${seconds(span)}`;
  }

  function show(a, b) {
    const w = Math.min(Math.max(b - a, 0.01), span);
    a = Math.min(Math.max(a, 0), span - w);
    from = a;
    to = a + w;
    draw();
  }

  const zoom = (factor, at) => show(at - (at - from) * factor, at + (to - at) * factor);
  const timeAt = (clientX) => {
    const r = lanes.getBoundingClientRect();
    return from + (clientX - r.left) / r.width * (to - from);
  };

  // Ctrl+wheel (and a touchpad's pinch) zooms; the plain wheel scrolls the page.
  lanes.addEventListener('wheel', (e) => {
    if (!e.ctrlKey) return;
    e.preventDefault();
    zoom(e.deltaY < 0 ? 0.8 : 1.25, timeAt(e.clientX));
  }, {passive: false});
  lanes.addEventListener('dblclick', (e) => zoom(e.shiftKey ? 2 : 0.5, timeAt(e.clientX)));
  let drag = null;
  lanes.addEventListener('pointerdown', (e) => {
    drag = {x: e.clientX, from, to, px: (to - from) / lanes.getBoundingClientRect().width};
    lanes.setPointerCapture(e.pointerId);
  });
  lanes.addEventListener('pointermove', (e) => {
    if (!drag) return;
    const dt = (e.clientX - drag.x) * drag.px;
    show(drag.from - dt, drag.to - dt);
  });
  lanes.addEventListener('pointerup', () => { drag = null; });
  for (const button of tl.querySelectorAll('button[data-zoom]')) {
    button.addEventListener('click', () => {
      const mid = (from + to) / 2;
      if (button.dataset.zoom === 'in') zoom(0.5, mid);
      else if (button.dataset.zoom === 'out') zoom(2, mid);
      else show(0, span);
    });
  }

  // Zooms to an element of the lanes (an overlap) or to a time, with room around it.
  function focus(a, b, element) {
    const pad = Math.max((b - a) * 3, span / 200, 1);
    show(a - pad, b + pad);
    for (const old of tl.querySelectorAll('.focus')) old.classList.remove('focus');
    if (element) element.classList.add('focus');
    tl.scrollIntoView({block: 'center'});
  }
  function follow(link) {
    if (link.dataset.at) {
      const t = Number(link.dataset.at);
      focus(t, t, null);
      return true;
    }
    const element = link.hash && lanes.querySelector(link.hash.replace(/[^#\w-]/g, ''));
    if (!element) return false;
    const x = Number(element.getAttribute('x'));
    focus(x, x + Number(element.getAttribute('width')), element);
    return true;
  }
  document.addEventListener('click', (e) => {
    const link = e.target.closest('a.to-timeline');
    if (link && follow(link)) {
      e.preventDefault();
      history.replaceState(null, '', link.hash);
    }
  });
  draw();
  if (location.hash.startsWith('#overlap-')) follow({hash: location.hash, dataset: {}});
})();
