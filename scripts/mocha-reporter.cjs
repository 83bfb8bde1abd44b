// Mocha spec reporter that ends with the plain closing line CI reads:
// "N passed, N failed" (plus ", N skipped" when tests were skipped).
const Mocha = require('mocha');
const { EVENT_RUN_END } = Mocha.Runner.constants;

class PlainSummary extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    runner.once(EVENT_RUN_END, () => {
      const s = runner.stats;
      const skipped = s.pending > 0 ? `, ${s.pending} skipped` : '';
      console.log(`${s.passes} passed, ${s.failures} failed${skipped}`);
    });
  }
}
module.exports = PlainSummary;
