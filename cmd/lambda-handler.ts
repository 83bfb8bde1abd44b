/**
 * The module `aws-lambda-ric` loads in the function's Lambda image (through cmd/lambda.mjs,
 * _HANDLER=cmd/lambda.handler): discovers the watch functions once, at the Lambda's init phase,
 * and exports the handler of those KRT_FUNCTIONS names (all when unset).
 */
import { pino } from 'pino';
import { loadFunctions, watchFunctions } from '../apiserver/functions.ts';
import { lambdaHandler, servedFunctions } from '../apiserver/fnlambda.ts';
import { VERSION } from '../lib/version.ts';

const log = pino({ base: { component: 'fn-lambda', version: VERSION } });
const served = servedFunctions(watchFunctions(await loadFunctions()), process.env);
log.info({ functions: served.map((f) => f.name) }, 'lambda function handler loaded');

export const handler = lambdaHandler(served, log);
