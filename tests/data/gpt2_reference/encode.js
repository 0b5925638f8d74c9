// Writes the reference GPT-2 token ids of a varied corpus, as JSON
// [{"text": ..., "ids": [...]}], using the gpt-3-encoder package as the oracle.
// Usage: node encode.js OUT.json [TEXT_FILE...]   (run with this folder's node_modules)
'use strict';
const fs = require('fs');
const { encode } = require('gpt-3-encoder');

const [out, ...files] = process.argv.slice(2);

const cases = [
  '', ' ', 'a', 'Hello world', 'Hello, world!', 'The quick brown fox jumps over the lazy dog.',
  "It's I'm you're we've they'll he'd she's 'tis ''s 'S 'LL Don't", "rock'n'roll o'clock 'quoted' \"double\"",
  'Numbers: 0 1 12 123 1234 12345 3.14159 -42 1e10 0x1F 1,000,000 2024-01-02 12:34:56',
  '    four leading spaces', 'trailing spaces    ', 'tabs\tand\t\ttabs', 'a  b   c    d',
  'line one\nline two\n\nline four\n\n\n', '\n\n\nleading newlines', 'mixed \t \n \r\n whitespace \u00a0 nbsp \u3000 ideographic',
  '   \n   \n', ' \t', 'x\n \n y',
  'def f(x):\n    return x ** 2  # square\n\nclass A:\n    pass\n',
  'int main() {\n  for (int i = 0; i < 10; ++i) { printf("%d\\n", i); }\n  return 0;\n}\n',
  '{"key": [1, 2, 3], "nested": {"a": null}}', '<html><body class="x">&amp; &lt;tag&gt;</body></html>',
  'Émile Zola écrivit « J\'accuse…! » — naïve café façade', 'Straße Übergrößenträger', 'Ελληνικά κείμενα', 'Русский текст, 123 ёжик',
  '日本語のテキストです。漢字とかなカナ', '中文文本，标点符号！', '한국어 텍스트', 'עברית ערבית العربية', 'हिन्दी पाठ',
  'emoji 😀🎉👍🏽 and 👨‍👩‍👧 family', 'math ∑ ∫ √ ∞ ≤ ≥ ≠ ± × ÷', 'combining e\u0301 a\u0300 n\u0303', 'Ⅻ ½ ² ³ ① ٣ ४',
  '<|endoftext|> is plain text here', '!!!??? ... --- *** ___ ~~~', '$$$ %%% ^^^ &&& ((( )))',
  'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa',
  'http://example.com/path?query=1&b=2#frag user@example.org',
];

// Seeded random texts mixing the character classes the pre-tokenizer tells apart.
let state = 12345;
function rand(n) {
  state = (state * 1103515245 + 12345) % 2147483648;
  return state % n;
}
const pools = [
  'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ', '0123456789', '     ', '\t\n\r\v\f', "''''sdtmlrve",
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
for (const f of files) cases.push(fs.readFileSync(f, 'utf-8'));

fs.writeFileSync(out, JSON.stringify(cases.map((text) => ({ text, ids: encode(text) }))));
console.log(`wrote ${cases.length} reference encodings to ${out}`);
