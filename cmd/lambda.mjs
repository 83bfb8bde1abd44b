// The handler module of the function's Lambda image: aws-lambda-ric looks for a .js/.mjs/.cjs
// file (_HANDLER=cmd/lambda.handler, LAMBDA_TASK_ROOT=the repository root); the functions
// themselves are TypeScript, loaded through tsx (node --import tsx). See cmd/lambda-handler.ts.
export { handler } from './lambda-handler.ts';
