// The handler module of the function's Lambda image: aws-lambda-ric looks for a .js/.mjs/.cjs
// file (_HANDLER=cmd/lambda.handler, LAMBDA_TASK_ROOT=the repository root, /var/task in the image).
// Like the other components it runs the JavaScript bundle (dist/lambda.mjs, the entry of
// cmd/lambda-handler.ts in localenv/bundle.ts; lambda/Dockerfile builds it, the local environment
// rebuilds it on every `up`, `npm run bundle` by hand): no TypeScript is compiled at the Lambda's
// init, and the image holds no tsx.
export { handler } from '../dist/lambda.mjs';
