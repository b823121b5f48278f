// Generates src/generated/api.ts from the API contract, ../api/openapi.json:
// a TypeScript type for each schema under components/schemas, and `contract`,
// the limits the create form checks (minimum, maximum, minLength, maxLength,
// pattern, enum values and the document's x-edt- extensions).
//
//   node scripts/generate-api.mjs          write src/generated/api.ts
//   node scripts/generate-api.mjs --check  exit 1 if it is not up to date
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const kDocumentPath = path.resolve(here, '../../api/openapi.json');
export const kOutputPath = path.resolve(here, '../src/generated/api.ts');

// The constraint keys copied into `contract`, by the name they get there.
const kLimitKeys = {
  minimum: 'minimum',
  maximum: 'maximum',
  minLength: 'minLength',
  maxLength: 'maxLength',
  pattern: 'pattern',
  enum: 'values',
  'x-edt-labels': 'labels',
  'x-edt-bytes': 'bytes',
  'x-edt-size-units': 'sizeUnits',
  'x-edt-duration-ms': 'durationMs',
  'x-edt-millicpus': 'millicpus',
  'x-edt-duration-units': 'durationUnits',
  'x-edt-system-directories': 'systemDirectories',
  'x-edt-key-pattern': 'keyPattern',
};

function refName(ref) {
  const prefix = '#/components/schemas/';
  if (!ref.startsWith(prefix)) throw new Error(`unsupported $ref ${ref}`);
  return ref.slice(prefix.length);
}

function comment(text) {
  return `/** ${text.replace(/\*\//g, '*\\/')} */`;
}

function propertyKey(name) {
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(name) ? name : JSON.stringify(name);
}

// The TypeScript type of a schema, written at `indent`.
function typeOf(schema, indent = '') {
  let type;
  if (schema.$ref) type = refName(schema.$ref);
  else if (schema.enum) type = schema.enum.map((v) => JSON.stringify(v)).join(' | ');
  else if (schema.oneOf || schema.anyOf) type = (schema.oneOf ?? schema.anyOf).map((s) => typeOf(s, indent)).join(' | ');
  else if (schema.type === 'string') type = 'string';
  else if (schema.type === 'integer' || schema.type === 'number') type = 'number';
  else if (schema.type === 'boolean') type = 'boolean';
  else if (schema.type === 'array') type = `${wrap(typeOf(schema.items, indent))}[]`;
  else if (schema.type === 'object') type = objectType(schema, indent);
  else throw new Error(`unsupported schema ${JSON.stringify(schema)}`);
  return schema.nullable ? `${type} | null` : type;
}

function wrap(type) {
  return /[|&]/.test(type) ? `(${type})` : type;
}

function objectType(schema, indent) {
  const properties = Object.entries(schema.properties ?? {});
  const extra = schema.additionalProperties;
  if (!properties.length) {
    return extra && typeof extra === 'object' ? `Record<string, ${typeOf(extra, indent)}>` : 'Record<string, unknown>';
  }
  const required = new Set(schema.required ?? []);
  const inner = `${indent}  `;
  const lines = properties.map(([name, s]) => {
    const doc = s.description ? `${inner}${comment(s.description)}\n` : '';
    return `${doc}${inner}${propertyKey(name)}${required.has(name) ? '' : '?'}: ${typeOf(s, inner)};`;
  });
  return `{\n${lines.join('\n')}\n${indent}}`;
}

function limitsOf(schema) {
  const out = {};
  for (const [key, name] of Object.entries(kLimitKeys)) if (key in schema) out[name] = schema[key];
  return out;
}

export function generate(documentText) {
  const schemas = JSON.parse(documentText).components.schemas;
  const out = [
    '// Generated from api/openapi.json by web/scripts/generate-api.mjs; do not edit.',
    '// Run `npm run generate` in web/ after changing the document.',
    '/* eslint-disable */',
    '',
  ];
  for (const [name, schema] of Object.entries(schemas)) {
    if (schema.description) out.push(comment(schema.description));
    out.push(`export type ${name} = ${typeOf(schema)};`, '');
  }
  const contract = {};
  for (const [name, schema] of Object.entries(schemas)) {
    const limits = limitsOf(schema);
    if (Object.keys(limits).length) contract[name] = limits;
  }
  out.push('// The limits of the schemas that have any, as the document writes them.');
  out.push(`export const contract = ${JSON.stringify(contract, null, 2)} as const;`, '');
  return out.join('\n');
}

function main() {
  const text = generate(fs.readFileSync(kDocumentPath, 'utf8'));
  const current = fs.existsSync(kOutputPath) ? fs.readFileSync(kOutputPath, 'utf8') : '';
  if (process.argv.includes('--check')) {
    if (current !== text) {
      console.error(`${path.relative(process.cwd(), kOutputPath)} is stale: run \`npm run generate\` in web/ (api/openapi.json changed)`);
      process.exit(1);
    }
    return;
  }
  if (current !== text) fs.writeFileSync(kOutputPath, text);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
