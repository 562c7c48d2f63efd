/** The part of autocannon's programmatic API the benches call; the package ships no typings. */
declare module 'autocannon' {
  interface Options {
    url: string;
    connections?: number;
    /** Seconds. */
    duration?: number;
    /** Worker threads firing the requests; without it they run on the caller's event loop. */
    workers?: number;
  }
  /** Latency in milliseconds, requests in requests per second. */
  interface Stats {
    average: number;
    p50: number;
    p99: number;
  }
  interface Result {
    requests: Stats;
    latency: Stats;
    errors: number;
    timeouts: number;
    non2xx: number;
  }
  /** Without a callback the returned tracker is also a thenable of the result. */
  function autocannon(options: Options): PromiseLike<Result>;
  export = autocannon;
}
