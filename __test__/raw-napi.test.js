'use strict'
// Raw Node-API only where napi-rs 3 has no safe form (issue 43, item 8): in the two binding
// files that still make raw calls, every `sys::napi_*` call has a comment saying why (a line
// starting `Raw` in the comment lines just above it or the SAFETY note it sits under), and the
// calls that napi-rs covers (strings, objects, references, errors, scopes, numbers, the event
// loop) are not made raw there.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { root } = require('./helpers.js')

const FILES = ['src/binding/settle.rs', 'src/binding/liveness.rs']
// Node-API functions napi-rs 3 wraps safely: Env::create_string, Object::new, create_ref /
// ObjectRef, Env::create_error or napi::Error, run_in_scope / HandleScope, Null, the number
// conversions, Env::get_uv_event_loop.
const COVERED = ['napi_create_string_utf8', 'napi_create_object', 'napi_create_reference', 'napi_delete_reference', 'napi_get_reference_value', 'napi_create_error', 'napi_open_handle_scope', 'napi_close_handle_scope', 'napi_get_null', 'napi_get_value_int32', 'napi_create_int32', 'napi_get_uv_event_loop']

test('every raw Node-API call in settle.rs and liveness.rs says why it is raw; none of those napi-rs covers is made raw', () => {
  const unexplained = []
  const covered = []
  for (const file of FILES) {
    const lines = fs.readFileSync(path.join(root, file), 'utf8').split('\n')
    lines.forEach((line, i) => {
      for (const m of line.matchAll(/sys::(napi_\w+)\(/g)) {
        if (COVERED.includes(m[1])) covered.push(`${file}:${i + 1}: ${m[1]}`)
        // The nearest comment block above the call (within 15 lines) must say `Raw`.
        const above = lines.slice(Math.max(0, i - 15), i + 1).filter((l) => /^\s*\/\//.test(l))
        if (!above.some((l) => /\bRaw\b/.test(l))) unexplained.push(`${file}:${i + 1}: ${m[1]}`)
      }
    })
  }
  assert.deepEqual(covered, [], 'made through napi-rs instead')
  assert.deepEqual(unexplained, [], 'each raw call has a comment saying why')
})
