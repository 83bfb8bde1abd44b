import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

describe('tempDir', () => {
  it('is removed with its contents when the process exits', () => {
    const script = [
      "import { writeFileSync, mkdirSync } from 'node:fs';",
      "import { join } from 'node:path';",
      `import { tempDir } from ${JSON.stringify(join(import.meta.dirname, 'temp-dir.ts'))};`,
      "const a = tempDir('krt-tmp-test-');",
      "const b = tempDir('krt-tmp-test-');",
      "mkdirSync(join(a, 'sub'));",
      "writeFileSync(join(a, 'sub', 'f'), 'x');",
      'console.log(JSON.stringify([a, b]));',
    ].join('\n');
    const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      encoding: 'utf8',
    });
    const dirs = JSON.parse(out) as string[];
    assert.equal(dirs.length, 2);
    for (const d of dirs) {
      assert.match(d, /krt-tmp-test-/);
      assert.equal(existsSync(d), false, `${d} removed`);
    }
  });
});
