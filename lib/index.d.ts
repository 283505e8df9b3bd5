/** `'native'` when the Rust addon is loaded, `'js'` on the pure-JavaScript fallback. */
export declare const backend: 'native' | 'js'
export * from './liveness'
export * from './session-recovery'
export * from './process-matrix-store'
export * from './atomic-file'
