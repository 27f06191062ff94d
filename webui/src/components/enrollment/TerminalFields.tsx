import { Textarea, TextInput } from '@mantine/core';
import type { FieldErrors } from '../../api/errors';
import { errorFor } from '../../lib/field-errors';

/** Prefixes as typed: one per line, or separated by commas or spaces. */
export function words(text: string): string[] {
  return text
    .split(/[\s,]+/)
    .map((s) => s.trim())
    .filter(Boolean);
}

/** The two fields' own checks, before anything is sent; `nameHint` says what the name is in that form. */
export function terminalFieldErrors(name: string, prefixes: string, nameHint: string): FieldErrors {
  const local: FieldErrors = {};
  if (!name.trim()) local.name = `${nameHint} (letters, digits, "_", ".", "-")`;
  if (!words(prefixes).length) local.prefixes = "At least one of the site's prefixes, e.g. 192.0.2.0/24";
  return local;
}

/** A terminal's name and its site's prefixes, as both the enrollment-token form and the enroll-by-fingerprint form ask them. */
export function TerminalFields({
  nameLabel,
  prefixesDescription,
  name,
  prefixes,
  onName,
  onPrefixes,
  errors,
}: {
  nameLabel: string;
  prefixesDescription: string;
  name: string;
  prefixes: string;
  onName: (v: string) => void;
  onPrefixes: (v: string) => void;
  errors: FieldErrors;
}) {
  return (
    <>
      <TextInput label={nameLabel} required value={name} onChange={(e) => onName(e.currentTarget.value)} error={errorFor(errors, 'name')} w={220} />
      <Textarea
        label="Site prefixes"
        description={prefixesDescription}
        required
        value={prefixes}
        onChange={(e) => onPrefixes(e.currentTarget.value)}
        error={errorFor(errors, 'prefixes')}
        autosize
        minRows={1}
        w={320}
      />
    </>
  );
}
