// Browser-safe entry (`@svc/protocol/verify`): no Node.js built-ins anywhere in this import graph.
export * from './bundle.js';
export * from './log.js';
export * from './strict-json.js';
export { ed25519PublicKeyHexProblem, ed25519PublicKeyProblem } from '../ed25519-point.js';
export { certificateMessageBytes, merkleRootHex, svc1MessageBytes, verifyEd25519 } from './primitives.js';
