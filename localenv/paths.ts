/** Where the checkout and the local environment live. */
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
/** The `krt local` environment. Tests use their own directories. */
export const LOCAL_ENV_DIR = join(REPO_ROOT, '.kruntimes', 'local');
