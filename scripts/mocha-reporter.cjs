// Mocha spec reporter that ends with the plain closing line CI reads:
// "N passed, N failed" (plus ", N skipped" when tests were skipped). When
// KRT_SUMMARY_FILE is set the line goes to that file instead, so a wrapper that prints
// more (coverage) can still end its output with it.
const fs = require('node:fs');
const Mocha = require('mocha');
const { EVENT_RUN_END } = Mocha.Runner.constants;

class PlainSummary extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    runner.once(EVENT_RUN_END, () => {
      const s = runner.stats;
      const skipped = s.pending > 0 ? `, ${s.pending} skipped` : '';
      const line = `${s.passes} passed, ${s.failures} failed${skipped}`;
      if (process.env.KRT_SUMMARY_FILE) fs.writeFileSync(process.env.KRT_SUMMARY_FILE, `${line}\n`);
      else console.log(line);
    });
  }
}
module.exports = PlainSummary;
