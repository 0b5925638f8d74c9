// Test oracle for tera's tokenizer.json and tiktoken readers, run by
// tokenizer_parity.py with this folder's node_modules (package-lock.json).
//
//   node reference.mjs make WORK [TEXT_FILE...]
//     WORK/cl100k_base.tiktoken   js-tiktoken's cl100k_base ranks as a tiktoken rank file
//     WORK/llama3_style.json      a tokenizer.json as Llama 3's is built: the cl100k ranks as a
//                                 byte-level BPE (every split of a token into two tokens is a merge,
//                                 ranked by the token), Split with the (?i:...) pattern, ignore_merges,
//                                 <|begin_of_text|> put before the text by TemplateProcessing
//     WORK/qwen2_style.json       the same vocabulary with Qwen2's pattern (one digit a piece),
//                                 merges applied without ignore_merges, no template
//     WORK/gpt2_style.json        js-tiktoken's GPT-2 ranks with the ByteLevel pre-tokenizer
//     WORK/corpus.json            the texts, as JavaScript strings decoded them (invalid UTF-8
//                                 becomes U+FFFD: neither reference takes bytes that are not text)
//   node reference.mjs encode WORK NAME.json...
//     WORK/reference_ids.json     {NAME: [[ids of text 0], ...], "cl100k_base.tiktoken": ...}:
//                                 Hugging Face's encode (add_special_tokens) for each tokenizer.json,
//                                 js-tiktoken's encode with every special token allowed for the ranks.
import fs from 'fs';
import path from 'path';
import { Tokenizer } from '@huggingface/tokenizers';
import { Tiktoken } from 'js-tiktoken/lite';
import cl100k from 'js-tiktoken/ranks/cl100k_base';
import gpt2 from 'js-tiktoken/ranks/gpt2';

const LLAMA3_PATTERN =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN2_PATTERN =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// token (base64) -> rank, from js-tiktoken's packed form: "! OFFSET tok tok ..." lines.
function ranksOf(encoding) {
  const ranks = new Map();
  for (const line of encoding.bpe_ranks.split('\n')) {
    if (!line) continue;
    const [, offset, ...tokens] = line.split(' ');
    tokens.forEach((t, i) => ranks.set(t, Number.parseInt(offset, 10) + i));
  }
  return ranks;
}

// GPT-2's printable form of bytes (its bytes_to_unicode table).
const byteChar = (() => {
  const printable = (b) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  const table = [];
  let next = 256;
  for (let b = 0; b < 256; b++) table.push(String.fromCodePoint(printable(b) ? b : next++));
  return table;
})();
const printable = (bytes) => Array.from(bytes, (b) => byteChar[b]).join('');

// A byte-level BPE tokenizer.json from ranks: vocab in printable form, every
// split of each token into two tokens as a merge, in rank order.
function hfFromRanks(ranks, { pattern, ignoreMerges, bos, specials }) {
  const byRank = [...ranks.entries()].sort((a, b) => a[1] - b[1]);
  const vocab = {};
  const known = new Set();
  for (const [b64, rank] of byRank) {
    const text = printable(Buffer.from(b64, 'base64'));
    vocab[text] = rank;
    known.add(text);
  }
  const merges = [];
  for (const [b64] of byRank) {
    const chars = [...printable(Buffer.from(b64, 'base64'))];
    for (let k = 1; k < chars.length; k++) {
      const l = chars.slice(0, k).join(''), r = chars.slice(k).join('');
      if (known.has(l) && known.has(r)) merges.push([l, r]);
    }
  }
  const added = Object.entries(specials).map(([content, id]) => ({
    id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
  }));
  const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: !pattern };
  const pre = pattern
    ? { type: 'Sequence', pretokenizers: [{ type: 'Split', pattern: { Regex: pattern }, behavior: 'Isolated', invert: false }, byteLevel] }
    : byteLevel;
  let post = { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true };
  if (bos) {
    const step = { SpecialToken: { id: bos, type_id: 0 } };
    post = {
      type: 'Sequence',
      processors: [post, {
        type: 'TemplateProcessing',
        single: [step, { Sequence: { id: 'A', type_id: 0 } }],
        pair: [step, { Sequence: { id: 'A', type_id: 0 } }, step, { Sequence: { id: 'B', type_id: 1 } }],
        special_tokens: { [bos]: { id: bos, ids: [specials[bos]], tokens: [bos] } },
      }],
    };
  }
  return {
    version: '1.0', truncation: null, padding: null, added_tokens: added, normalizer: null,
    pre_tokenizer: pre, post_processor: post,
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: false, byte_fallback: false, ignore_merges: ignoreMerges, vocab, merges,
    },
  };
}

// The texts: hand-picked cases of what pre-tokenizers tell apart, seeded
// random mixes, and the files named. Avoided: U+0085, U+180E and U+FEFF,
// where JavaScript's \s and Unicode's White_Space (Rust's \s) disagree.
function corpus(files) {
  const cases = [
    '', ' ', 'a', 'Hello world', 'Hello, world!', "It's I'M you're WE'VE they'll he'd 'tis ''s Don't",
    'Numbers: 0 1 12 123 1234 12345 3.14159 -42 1e10 0x1F 1,000,000 2024-01-02 12:34:56 ٣٤٥ ४२',
    '    four leading spaces', 'trailing spaces    ', 'tabs\tand\t\ttabs', 'a  b   c    d', '\tindented\n\t\tmore',
    'line one\nline two\n\nline four\n\n\n', '\r\nwindows\r\nline ends\r\n', 'x.\n\ny', '!?\r\n!?', '  \n  x',
    'def f(x):\n    return x ** 2  # square\n\nclass A:\n    pass\n',
    'int main() {\n  for (int i = 0; i < 10; ++i) { printf("%d\\n", i); }\n  return 0;\n}\n',
    '{"key": [1, 2, 3], "nested": {"a": null}}', '<html><body class="x">&amp; &lt;tag&gt;</body></html>',
    'Émile Zola écrivit « J\'accuse…! » — naïve café façade', 'Straße Übergrößenträger', 'Ελληνικά κείμενα',
    'Русский текст, 123 ёжик', '日本語のテキストです。漢字とかなカナ', '中文文本，标点符号！', '한국어 텍스트',
    'עברית ערבית العربية', 'हिन्दी पाठ', 'emoji 😀🎉👍🏽 and 👨‍👩‍👧 family 🇫🇷', 'math ∑ ∫ √ ∞ ≤ ≥ ≠ ± × ÷',
    'combining e\u0301 a\u0300 n\u0303', 'spaces \u00a0 \u2003 \u3000 \u2028 kinds',
    'a <|endoftext|> b<|endoftext|>c', '<|begin_of_text|>already', 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa',
    'http://example.com/path?query=1&b=2#frag user@example.org', '$hello ..hello .hello',
  ];
  let state = 20251206;
  const rand = (n) => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return state % n;
  };
  const pools = [
    'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ', '0123456789', '     ', '\t\n\r', "''''sdtmlrveSDTMLRVE",
    '.,;:!?-_()[]{}<>/\\|@#$%^&*+=~`"', 'éèêëàâäôöûüçñßøåæœ', 'абвгдежзийклмнопрстуфхцчшщыэюя', '日本語中文한국어テキスト',
    '٠١٢٣٤٥٦٧٨٩Ⅰ½²', '😀🎉👍🔥✨', '\u00a0\u2003\u3000\u2028',
  ];
  for (let t = 0; t < 300; t++) {
    let s = '';
    const len = 1 + rand(120);
    for (let i = 0; i < len; i++) {
      const pool = [...pools[rand(pools.length)]];
      s += pool[rand(pool.length)];
    }
    cases.push(s);
  }
  for (const f of files) cases.push(fs.readFileSync(f).toString('utf-8'));
  cases.push(Buffer.from([0x61, 0xff, 0xfe, 0x20, 0xc3, 0x28, 0x62]).toString('utf-8'));  // invalid bytes -> U+FFFD
  return cases;
}

const CL100K_SPECIALS = { '<|begin_of_text|>': 100256, ...cl100k.special_tokens };

function make(work, files) {
  fs.mkdirSync(work, { recursive: true });
  const ranks = ranksOf(cl100k);
  const lines = [...ranks.entries()].sort((a, b) => a[1] - b[1]).map(([t, r]) => `${t} ${r}`);
  fs.writeFileSync(path.join(work, 'cl100k_base.tiktoken'), lines.join('\n') + '\n');
  const write = (name, j) => fs.writeFileSync(path.join(work, name), JSON.stringify(j));
  write('llama3_style.json', hfFromRanks(ranks, { pattern: LLAMA3_PATTERN, ignoreMerges: true, bos: '<|begin_of_text|>', specials: CL100K_SPECIALS }));
  write('qwen2_style.json', hfFromRanks(ranks, { pattern: QWEN2_PATTERN, ignoreMerges: false, specials: cl100k.special_tokens }));
  write('gpt2_style.json', hfFromRanks(ranksOf(gpt2), { ignoreMerges: false, specials: gpt2.special_tokens }));
  write('corpus.json', corpus(files));
  console.log(`wrote ${lines.length} cl100k ranks and three tokenizer.json files to ${work}`);
}

function encode(work, names) {
  const texts = JSON.parse(fs.readFileSync(path.join(work, 'corpus.json'), 'utf-8'));
  const out = {};
  for (const name of names) {
    const tok = new Tokenizer(JSON.parse(fs.readFileSync(path.join(work, name), 'utf-8')), {});
    out[name] = texts.map((t) => tok.encode(t, { add_special_tokens: true }).ids);
  }
  // js-tiktoken with the specials tera is given (--special): cl100k's and <|begin_of_text|>.
  const tik = new Tiktoken({ ...cl100k, special_tokens: CL100K_SPECIALS });
  out['cl100k_base.tiktoken'] = texts.map((t) => tik.encode(t, 'all'));
  fs.writeFileSync(path.join(work, 'reference_ids.json'), JSON.stringify(out));
  console.log(`wrote reference ids of ${texts.length} texts for ${names.length + 1} tokenizers`);
}

const [mode, work, ...rest] = process.argv.slice(2);
if (mode === 'make') make(work, rest);
else if (mode === 'encode') encode(work, rest);
else {
  console.error('usage: node reference.mjs make WORK [TEXT_FILE...] | encode WORK NAME.json...');
  process.exit(2);
}
