/** The part of `html-to-text` (which ships no types) that knowledge-base extraction calls. */
declare module 'html-to-text' {
  export interface SelectorDefinition {
    selector: string;
    format?: string;
    options?: Record<string, unknown>;
  }
  export interface HtmlToTextOptions {
    wordwrap?: number | false | null;
    preserveNewlines?: boolean;
    selectors?: SelectorDefinition[];
    limits?: { maxInputLength?: number };
  }
  export function convert(html: string, options?: HtmlToTextOptions): string;
}
