import { Page } from '../components/ui';
import { Link } from '../router';

export function NotFoundPage() {
  return (
    <Page title="Page not found">
      <p>
        There is no such page. <Link href="/">Back to the overview</Link>.
      </p>
    </Page>
  );
}
