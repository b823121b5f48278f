// Types of generate-api.mjs, for the test that checks its output is current.
export const kDocumentPath: string;
export const kOutputPath: string;
export function generate(documentText: string): string;
