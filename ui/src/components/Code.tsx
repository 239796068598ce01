/** CodeMirror 6: a YAML/JSON viewer or editor, and a side-by-side diff of two texts. */
import { json } from '@codemirror/lang-json';
import { yaml } from '@codemirror/lang-yaml';
import { MergeView } from '@codemirror/merge';
import { EditorState, type Extension } from '@codemirror/state';
import { EditorView, basicSetup } from 'codemirror';
import { useEffect, useRef } from 'react';

const lang = (l: 'yaml' | 'json'): Extension => (l === 'yaml' ? yaml() : json());

/** The server's per-page style nonce (Content-Security-Policy): CodeMirror puts its theme in a <style> element. */
const nonce = document.querySelector('meta[name="csp-nonce"]')?.getAttribute('content') ?? '';
const cspNonce = EditorView.cspNonce.of(nonce);

export function CodeView({ value, language, editable = false, onChange, testId }: {
  value: string;
  language: 'yaml' | 'json';
  editable?: boolean;
  onChange?: (v: string) => void;
  testId?: string;
}) {
  const host = useRef<HTMLDivElement>(null);
  const view = useRef<EditorView | null>(null);
  const changed = useRef(onChange);
  changed.current = onChange;
  useEffect(() => {
    const v = new EditorView({
      parent: host.current!,
      state: EditorState.create({
        doc: value,
        extensions: [
          cspNonce,
          basicSetup,
          lang(language),
          EditorView.editable.of(editable),
          EditorState.readOnly.of(!editable),
          EditorView.updateListener.of((u) => {
            if (u.docChanged) changed.current?.(u.state.doc.toString());
          }),
        ],
      }),
    });
    view.current = v;
    return () => v.destroy();
    // The editor is created once per language/mode; value changes are applied below.
  }, [language, editable]);
  useEffect(() => {
    const v = view.current;
    if (v && v.state.doc.toString() !== value) v.dispatch({ changes: { from: 0, to: v.state.doc.length, insert: value } });
  }, [value]);
  return <div className="code" ref={host} data-testid={testId} />;
}

export function DiffView({ left, right }: { left: string; right: string }) {
  const host = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const ext = [cspNonce, basicSetup, yaml(), EditorView.editable.of(false), EditorState.readOnly.of(true)];
    const m = new MergeView({ a: { doc: left, extensions: ext }, b: { doc: right, extensions: ext }, parent: host.current! });
    return () => m.destroy();
  }, [left, right]);
  return <div className="code diff" ref={host} data-testid="diff" />;
}
