// Lint: type-aware rules, function-size limits and the import layering of DESIGN.md.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const layer = (from, forbidden) => ({
  files: [`${from}/**/*.ts`],
  rules: {
    'no-restricted-imports': [
      'error',
      {
        patterns: forbidden.map((dir) => ({
          group: [`**/${dir}/**`, `../${dir}/*`, `../../${dir}/*`],
          message: `${from}/ must not import from ${dir}/ (layering, see DESIGN.md)`,
        })),
      },
    ],
  },
});

export default tseslint.config(
  {
    ignores: [
      'node_modules/**',
      '.kruntimes/**',
      'coverage/**',
      'lib/api/generated/**',
      'scripts/k8s-bin/**',
      'ui/dist/**',
      'dist/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ['*.js', 'cmd/*.mjs'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/explicit-function-return-type': [
        'error',
        { allowExpressions: true, allowTypedFunctionExpressions: true },
      ],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'max-lines-per-function': ['error', { max: 60, skipBlankLines: true, skipComments: true }],
      'max-depth': ['error', 4],
      'max-params': ['error', 5],
      complexity: ['error', 20],
    },
  },
  {
    files: ['**/*.test.ts', 'e2e/**/*.ts', 'bench/**/*.ts'],
    rules: { 'max-lines-per-function': 'off', complexity: 'off', '@typescript-eslint/no-unused-expressions': 'off' },
  },
  { files: ['eslint.config.js', 'scripts/*.cjs'], ...tseslint.configs.disableTypeChecked },
  {
    files: ['eslint.config.js', 'scripts/*.cjs'],
    rules: { '@typescript-eslint/explicit-function-return-type': 'off' },
  },
  {
    files: ['scripts/*.cjs'],
    languageOptions: { globals: { require: 'readonly', module: 'writable', console: 'readonly', process: 'readonly' } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // The dashboard's Preact components: their JSX return type is evident.
    files: ['ui/**/*.tsx'],
    rules: { '@typescript-eslint/explicit-function-return-type': 'off' },
  },
  layer('lib', ['functions', 'runtimed', 'apiserver', 'cli', 'nodeagent', 'localenv', 'e2e']),
  layer('functions', ['runtimed', 'apiserver', 'cli', 'nodeagent', 'localenv']),
  layer('runtimed', ['functions', 'apiserver', 'cli', 'nodeagent', 'localenv']),
  layer('nodeagent', ['functions', 'runtimed', 'apiserver', 'cli', 'localenv']),
  layer('localenv', ['functions', 'runtimed', 'apiserver', 'cli']),
);
