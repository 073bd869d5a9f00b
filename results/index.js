// The index's filters: a run's row stays shown when every chosen value is among its own
// (a run may compose several nemeses).
(() => {
  const filters = [...document.querySelectorAll('select[data-filter]')];
  const rows = [...document.querySelectorAll('tr.run')];
  const shown = document.getElementById('shown');
  if (!shown) return;
  function apply() {
    let n = 0;
    for (const row of rows) {
      const keep = filters.every((f) => !f.value || JSON.parse(row.dataset[f.dataset.filter]).includes(f.value));
      row.hidden = !keep;
      if (keep) n++;
    }
    shown.textContent = `${n} of ${rows.length} runs`;
  }
  for (const f of filters) f.addEventListener('change', apply);
  apply();
})();
