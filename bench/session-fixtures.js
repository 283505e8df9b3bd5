'use strict'
// Session files for benchmarks: a v3 header, filler turns, the answer, then ~1 MiB of records
// after it (tool results, a user turn), in the shapes a crashed worker leaves behind.
const fs = require('node:fs')
const path = require('node:path')

let n = 0
const id = () => (n++).toString(16).padStart(8, '0')
const rec = (message) => JSON.stringify({ type: 'message', id: id(), parentId: null, timestamp: '2026-10-03T10:00:00.000Z', message })
const toolResult = (bytes) =>
  rec({ role: 'toolResult', toolCallId: 'c', toolName: 'bash', content: [{ type: 'text', text: 'x'.repeat(bytes) }], isError: false, timestamp: 3 })
const assistant = (text, stopReason = 'stop') =>
  rec({ role: 'assistant', content: [{ type: 'thinking', thinking: 'hmm' }, { type: 'text', text }], api: 'a', provider: 'p', model: 'm', usage: { input: 1, output: 2 }, stopReason, timestamp: 2 })
const toolCallOnly = () =>
  rec({ role: 'assistant', content: [{ type: 'toolCall', id: 'c', name: 'bash', arguments: { command: 'make' } }], stopReason: 'toolUse', timestamp: 2 })

/**
 * Write `<dir>/<name>` of about `bytes` bytes. shape: 'clean' (ends after records), 'torn' (a
 * partial final line), 'mid-turn' (tool calls and a pending assistant after the answer),
 * 'front' (the answer right after the header, then only turns that do not qualify: user
 * prompts, tool-call-only assistant messages, tool results — recovery must scan it all).
 */
function writeSessionFile(dir, name, bytes, shape = 'clean') {
  fs.mkdirSync(dir, { recursive: true })
  const file = path.join(dir, name)
  const fd = fs.openSync(file, 'w')
  const write = (s) => fs.writeSync(fd, `${s}\n`)
  write(JSON.stringify({ type: 'session', version: 3, id: 's', timestamp: '2026-10-03T10:00:00.000Z', cwd: '/w' }))
  if (shape === 'front') {
    write(assistant('THE ANSWER'))
    const turn = [rec({ role: 'user', content: 'go on' }), toolCallOnly(), toolResult(16 * 1024)].join('\n')
    for (let written = 0; written < bytes - 64 * 1024; written += turn.length + 1) write(turn)
    fs.closeSync(fd)
    return file
  }
  const tailBytes = 1024 * 1024
  let written = 0
  const filler = toolResult(16 * 1024)
  const fillerTurn = [rec({ role: 'user', content: 'go on' }), assistant('intermediate'), toolCallOnly(), filler].join('\n')
  while (written < bytes - tailBytes - 64 * 1024) {
    write(fillerTurn)
    written += fillerTurn.length + 1
  }
  write(assistant('THE ANSWER'))
  // About 1 MiB of records after the answer, none of which qualifies.
  let after = 0
  const big = toolResult(60 * 1024)
  while (after < tailBytes - 64 * 1024) {
    write(shape === 'mid-turn' ? `${toolCallOnly()}\n${big}` : big)
    after += big.length + 1
  }
  if (shape === 'mid-turn') write(assistant('half a thought', 'pending'))
  if (shape === 'torn') fs.writeSync(fd, assistant('cut off mid-wri').slice(0, 60))
  fs.closeSync(fd)
  return file
}

module.exports = { writeSessionFile }
