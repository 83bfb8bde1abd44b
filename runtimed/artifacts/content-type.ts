/**
 * Content types of stored file artifacts: by file extension, else by sniffing the first 512 bytes
 * (a subset of Go's http.DetectContentType), else application/octet-stream.
 */
import { extname } from 'node:path';

export const DEFAULT_CONTENT_TYPE = 'application/octet-stream';
export const SNIFF_BYTES = 512;

const BY_EXTENSION: Record<string, string> = {
  '.avif': 'image/avif',
  '.css': 'text/css; charset=utf-8',
  '.csv': 'text/csv; charset=utf-8',
  '.gif': 'image/gif',
  '.gz': 'application/gzip',
  '.htm': 'text/html; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
  '.jpeg': 'image/jpeg',
  '.jpg': 'image/jpeg',
  '.js': 'text/javascript; charset=utf-8',
  '.json': 'application/json',
  '.md': 'text/markdown; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.pdf': 'application/pdf',
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
  '.tar': 'application/x-tar',
  '.tgz': 'application/gzip',
  '.txt': 'text/plain; charset=utf-8',
  '.wasm': 'application/wasm',
  '.webp': 'image/webp',
  '.xml': 'text/xml; charset=utf-8',
  '.yaml': 'application/yaml',
  '.yml': 'application/yaml',
  '.zip': 'application/zip',
};

const SIGNATURES: [Buffer, string][] = [
  [Buffer.from('%PDF-'), 'application/pdf'],
  [Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), 'image/png'],
  [Buffer.from([0xff, 0xd8, 0xff]), 'image/jpeg'],
  [Buffer.from('GIF87a'), 'image/gif'],
  [Buffer.from('GIF89a'), 'image/gif'],
  [Buffer.from([0x1f, 0x8b, 0x08]), 'application/x-gzip'],
  [Buffer.from([0x50, 0x4b, 0x03, 0x04]), 'application/zip'],
  [Buffer.from([0x00, 0x61, 0x73, 0x6d]), 'application/wasm'],
  [Buffer.from([0xfe, 0xff]), 'text/plain; charset=utf-16be'],
  [Buffer.from([0xff, 0xfe]), 'text/plain; charset=utf-16le'],
  [Buffer.from([0xef, 0xbb, 0xbf]), 'text/plain; charset=utf-8'],
];

const HTML_PREFIXES = ['<!DOCTYPE HTML', '<HTML', '<HEAD', '<SCRIPT', '<BODY', '<!--', '<P', '<DIV', '<TITLE'];

function isBinaryByte(b: number): boolean {
  return b <= 0x08 || b === 0x0b || (b >= 0x0e && b <= 0x1a) || (b >= 0x1c && b <= 0x1f);
}

/** Sniffs a content prefix; empty content is application/octet-stream. */
export function sniffContentType(head: Buffer): string {
  const data = head.subarray(0, SNIFF_BYTES);
  if (data.length === 0) return DEFAULT_CONTENT_TYPE;
  for (const [sig, type] of SIGNATURES) if (data.subarray(0, sig.length).equals(sig)) return type;
  const text = data.toString('latin1').replace(/^[\t\n\f\r ]+/, '');
  if (text.startsWith('<?xml')) return 'text/xml; charset=utf-8';
  const upper = text.slice(0, 16).toUpperCase();
  if (HTML_PREFIXES.some((p) => upper.startsWith(p) && /[ >]/.test(upper.charAt(p.length))))
    return 'text/html; charset=utf-8';
  for (const b of data) if (isBinaryByte(b)) return DEFAULT_CONTENT_TYPE;
  return 'text/plain; charset=utf-8';
}

export function contentTypeByExtension(name: string): string | undefined {
  return BY_EXTENSION[extname(name).toLowerCase()];
}

/** Extension first, then sniffing. */
export function detectContentType(name: string, head: Buffer): string {
  return contentTypeByExtension(name) ?? sniffContentType(head);
}
