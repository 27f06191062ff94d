import { EmptyState } from '../components/StateViews';
import { PageHeader } from '../components/PageHeader';

export default function BodPage() {
  return (
    <>
      <PageHeader title="BoD tuning" />
      <EmptyState title="Coming soon" />
    </>
  );
}
