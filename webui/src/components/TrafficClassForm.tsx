import { Alert, Grid, NumberInput, Select, TagsInput, TextInput } from '@mantine/core';
import type { FieldErrors } from '../api/errors';
import type { ClassAction, ClassMatch, TrafficClass } from '../api/endpoints';
import { errorFor } from '../lib/field-errors';
import { choices } from '../lib/system-config';
import { bounds, def } from '../lib/schema-check';

export interface TrafficClassFormProps {
  value: TrafficClass;
  onChange: (next: TrafficClass) => void;
  /** Errors for this class only, keyed by path inside it ("match.dports.0"). */
  errors: FieldErrors;
  idPrefix: string;
}

/** A class's priority bounds, from the schema. */
const PRIORITY = bounds('TrafficClass', 'priority');
/** What a class name may be, in the schema's words. */
const NAME_HELP = def('ObjectName').description ?? '';

/** Edits one traffic class; shows client-side and API (422) errors under the field they concern. */
export function TrafficClassForm({ value, onChange, errors, idPrefix }: TrafficClassFormProps) {
  const setMatch = (patch: Partial<ClassMatch>) => onChange({ ...value, match: { ...value.match, ...patch } });
  const id = (s: string) => `${idPrefix}-${s}`;
  return (
    <Grid gutter="sm">
      {errors._ && (
        <Grid.Col span={12}>
          <Alert color="red" role="alert" py="xs">
            {errors._}
          </Alert>
        </Grid.Col>
      )}
      <Grid.Col span={{ base: 12, sm: 4 }}>
        <TextInput id={id('name')} label="Name" description={NAME_HELP} required value={value.name} onChange={(e) => onChange({ ...value, name: e.currentTarget.value })} error={errorFor(errors, 'name')} />
      </Grid.Col>
      <Grid.Col span={{ base: 6, sm: 4 }}>
        <NumberInput
          id={id('priority')}
          label="Priority"
          description="Lower is evaluated first"
          min={PRIORITY.min}
          max={PRIORITY.max}
          value={value.priority}
          onChange={(v) => onChange({ ...value, priority: typeof v === 'number' ? v : Number(v) || 0 })}
          error={errorFor(errors, 'priority')}
        />
      </Grid.Col>
      <Grid.Col span={{ base: 6, sm: 4 }}>
        <Select
          id={id('action')}
          label="Action"
          data={choices('Action')}
          value={value.action}
          allowDeselect={false}
          onChange={(v) => v && onChange({ ...value, action: v as ClassAction })}
          error={errorFor(errors, 'action')}
        />
      </Grid.Col>
      <Grid.Col span={{ base: 6, sm: 3 }}>
        <Select
          id={id('protocol')}
          label="Protocol"
          data={choices('MatchProtocol')}
          value={value.match.protocol}
          allowDeselect={false}
          onChange={(v) => v && setMatch({ protocol: v as ClassMatch['protocol'] })}
          error={errorFor(errors, 'match.protocol') ?? (errors.match && !errors['match.protocol'] ? errors.match : undefined)}
        />
      </Grid.Col>
      <Grid.Col span={{ base: 6, sm: 3 }}>
        <Select
          id={id('cc')}
          label="Satellite congestion control"
          data={[{ value: '', label: 'inherit' }, ...choices('CongestionControl')]}
          value={value.satellite.congestion_control ?? ''}
          allowDeselect={false}
          onChange={(v) => onChange({ ...value, satellite: { ...value.satellite, congestion_control: v ? (v as TrafficClass['satellite']['congestion_control']) : null } })}
          error={errorFor(errors, 'satellite.congestion_control')}
        />
      </Grid.Col>
      <Grid.Col span={{ base: 12, sm: 6 }}>
        <TagsInput
          id={id('dports')}
          label="Destination ports"
          description="A port (443) or a range (8000-8080); Enter adds"
          value={value.match.dports}
          onChange={(v) => setMatch({ dports: v })}
          error={errorFor(errors, 'match.dports')}
        />
      </Grid.Col>
      <Grid.Col span={{ base: 12, sm: 6 }}>
        <TagsInput id={id('src')} label="Source CIDRs" description="Empty matches any" value={value.match.src} onChange={(v) => setMatch({ src: v })} error={errorFor(errors, 'match.src')} />
      </Grid.Col>
      <Grid.Col span={{ base: 12, sm: 6 }}>
        <TagsInput id={id('dst')} label="Destination CIDRs" description="Empty matches any" value={value.match.dst} onChange={(v) => setMatch({ dst: v })} error={errorFor(errors, 'match.dst')} />
      </Grid.Col>
    </Grid>
  );
}
