//! The runner driven by a synthetic watch and an in-memory reconciler (no apiserver; paused time).

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use kube::ResourceExt;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::watcher::Event;

use super::*;
use crate::metrics::RuleErrorLabels;
use crate::watch_hub::SharedWatch;

#[derive(Debug)]
struct TestError {
    permanent: bool,
    message: String,
}

impl Display for TestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl ReconcileError for TestError {
    fn category(&self) -> &'static str {
        if self.permanent { "refused" } else { "api" }
    }
    fn is_permanent(&self) -> bool {
        self.permanent
    }
}

/// Reconciles object names; `script` says what each attempt of a key returns (then `Ok(AwaitChange)`).
/// What one attempt returns: an action, or an error (permanent?, message).
type Outcome = Result<Action, (bool, &'static str)>;

#[derive(Default)]
struct Recorder {
    script: Mutex<HashMap<String, Vec<Outcome>>>,
    attempts: Mutex<Vec<(String, tokio::time::Instant)>>,
    /// Per attempt, the time since its key became due, as seen from inside the reconcile.
    due_ages: Mutex<Vec<(String, Option<Duration>)>>,
    reported: Mutex<Vec<String>>,
    running: AtomicUsize,
    max_running: AtomicUsize,
    names: Mutex<Vec<String>>,
}

impl Reconcile for Recorder {
    type Key = String;
    type Error = TestError;
    type Report = std::convert::Infallible;

    fn keys_for(&self, _kind: &KindKey, change: &Change) -> Vec<String> {
        match change.object() {
            Some(object) => vec![object.name_any()],
            None => self.names.lock().unwrap().clone(),
        }
    }

    async fn reconcile(&self, key: &String) -> Result<Reconciled<Self::Report>, TestError> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_running.fetch_max(now, Ordering::SeqCst);
        self.attempts
            .lock()
            .unwrap()
            .push((key.clone(), tokio::time::Instant::now()));
        self.due_ages.lock().unwrap().push((key.clone(), since_due()));
        tokio::time::sleep(Duration::from_millis(10)).await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        let next = self
            .script
            .lock()
            .unwrap()
            .get_mut(key)
            .and_then(|s| (!s.is_empty()).then(|| s.remove(0)));
        match next {
            None => Ok(Action::AwaitChange.into()),
            Some(Ok(action)) => Ok(action.into()),
            Some(Err((permanent, message))) => Err(TestError {
                permanent,
                message: message.to_string(),
            }),
        }
    }

    async fn report_error(&self, key: &String, error: &TestError) {
        self.reported.lock().unwrap().push(format!("{key}: {error}"));
    }
}

fn resource() -> ApiResource {
    ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&())
}

fn object(name: &str) -> DynamicObject {
    DynamicObject::new(name, &resource()).within("default")
}

fn runner(metrics: &Arc<Metrics>, concurrency: usize) -> Runner {
    Runner {
        gate: None,
        backoff: crate::runner::Backoff::CONTROLLER,
        rule: "test-rule".into(),
        kind: "Reconciler",
        concurrency,
        metrics: metrics.clone(),
        health: Arc::new(Health::default()),
    }
}

fn attempts_of(recorder: &Recorder, key: &str) -> Vec<tokio::time::Instant> {
    recorder
        .attempts
        .lock()
        .unwrap()
        .iter()
        .filter(|(k, _)| k == key)
        .map(|(_, at)| *at)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn changes_become_deduplicated_keys_reconciled_within_the_concurrency_limit() {
    let metrics = Arc::new(Metrics::new());
    let watch = SharedWatch::new(resource(), &Default::default());
    let recorder = Arc::new(Recorder::default());
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (recorder, subscription, stop, runner) =
            (recorder.clone(), watch.subscribe(), stop.clone(), runner(&metrics, 3));
        async move {
            runner
                .run(recorder, vec![subscription], Requeued::none(), vec![], stop)
                .await
        }
    });
    tokio::task::yield_now().await;
    for index in 0..20 {
        watch.apply(Event::Apply(object(&format!("p{index}"))));
        watch.apply(Event::Apply(object(&format!("p{index}"))));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let attempts = recorder.attempts.lock().unwrap().len();
    assert_eq!(attempts, 20, "each key once: repeated changes of a queued key coalesce");
    assert_eq!(
        recorder.max_running.load(Ordering::SeqCst),
        3,
        "at most `concurrency` at once"
    );
    assert_eq!(
        metrics
            .reconciles
            .get_or_create(&Metrics::labels("test-rule", "Reconciler"))
            .get(),
        20
    );
    stop.cancel();
    task.await.unwrap().unwrap();
}

/// A resync heard while the caches filled (before the runner started) is taken in with the first keys, before
/// any reconcile starts: each key is reconciled once, not once and again after the resync.
#[tokio::test(start_paused = true)]
async fn changes_heard_before_the_start_join_the_first_keys() {
    let metrics = Arc::new(Metrics::new());
    let watch = SharedWatch::new(resource(), &Default::default());
    let recorder = Arc::new(Recorder::default());
    *recorder.names.lock().unwrap() = vec!["a".into(), "b".into()];
    let subscription = watch.subscribe();
    watch.apply(Event::Init);
    watch.apply(Event::InitApply(object("a")));
    watch.apply(Event::InitApply(object("b")));
    watch.apply(Event::InitDone);
    let (stop, task) = start_runner(&recorder, vec![subscription], &metrics, 4, &["a", "b"]);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(attempts_of(&recorder, "a").len(), 1);
    assert_eq!(attempts_of(&recorder, "b").len(), 1);
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn transient_errors_back_off_per_key_and_are_reported_once_permanent_ones_wait_for_a_change() {
    let metrics = Arc::new(Metrics::new());
    let watch = SharedWatch::new(resource(), &Default::default());
    let recorder = Arc::new(Recorder::default());
    recorder.script.lock().unwrap().insert(
        "flaky".into(),
        vec![
            Err((false, "timeout")),
            Err((false, "timeout")),
            Err((false, "timeout")),
        ],
    );
    recorder
        .script
        .lock()
        .unwrap()
        .insert("refused".into(), vec![Err((true, "conflict"))]);
    let (stop, task) = start_runner(&recorder, vec![watch.subscribe()], &metrics, 4, &["flaky", "refused"]);
    tokio::time::sleep(Duration::from_secs(30)).await;
    let flaky = attempts_of(&recorder, "flaky");
    assert_eq!(flaky.len(), 4, "three failures, then success");
    let gaps: Vec<Duration> = flaky.windows(2).map(|w| w[1] - w[0]).collect();
    // Each gap is the backoff plus the 10 ms the attempt itself took.
    let expected = [510, 1010, 2010].map(Duration::from_millis);
    assert_eq!(gaps, expected, "500 ms, doubling");
    assert_eq!(
        attempts_of(&recorder, "refused").len(),
        1,
        "a permanent error is not retried by itself"
    );
    let mut reported = recorder.reported.lock().unwrap().clone();
    reported.sort();
    assert_eq!(
        reported,
        vec!["flaky: timeout".to_string(), "refused: conflict".to_string()],
        "each distinct error reported once, not per retry"
    );
    let errors = |category: &str| {
        metrics
            .reconcile_errors
            .get_or_create(&RuleErrorLabels {
                rule: "test-rule".into(),
                kind: "Reconciler".into(),
                category: category.into(),
            })
            .get()
    };
    assert_eq!((errors("api"), errors("refused")), (3, 1));
    watch.apply(Event::Apply(object("refused")));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        attempts_of(&recorder, "refused").len(),
        2,
        "a change brings the permanent error's key back"
    );
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn requeue_after_resyncs_and_a_resync_enqueues_every_known_key() {
    let metrics = Arc::new(Metrics::new());
    let watch = SharedWatch::new(resource(), &Default::default());
    let recorder = Arc::new(Recorder::default());
    *recorder.names.lock().unwrap() = vec!["a".into(), "b".into()];
    recorder
        .script
        .lock()
        .unwrap()
        .insert("a".into(), vec![Ok(Action::RequeueAfter(Duration::from_secs(60)))]);
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (recorder, subscription, stop, runner) =
            (recorder.clone(), watch.subscribe(), stop.clone(), runner(&metrics, 1));
        async move {
            runner
                .run(recorder, vec![subscription], Requeued::none(), vec!["a".into()], stop)
                .await
        }
    });
    tokio::time::sleep(Duration::from_secs(61)).await;
    assert_eq!(attempts_of(&recorder, "a").len(), 2, "requeued after 60 s");
    watch.apply(Event::InitDone);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(attempts_of(&recorder, "a").len(), 3);
    assert_eq!(attempts_of(&recorder, "b").len(), 1, "a resync reaches every key");
    stop.cancel();
    task.await.unwrap().unwrap();
}

/// A key whose reconcile failed for good, deleted while the watch was down: the relist does not list it, yet the
/// resync reconciles it once more, which finds it gone and clears its error (the rule is no longer degraded).
#[tokio::test(start_paused = true)]
async fn a_relist_without_a_failed_key_reconciles_it_as_gone_and_clears_its_error() {
    let metrics = Arc::new(Metrics::new());
    let watch = SharedWatch::new(resource(), &Default::default());
    let recorder = Arc::new(Recorder::default());
    *recorder.names.lock().unwrap() = vec!["kept".into(), "gone".into()];
    recorder
        .script
        .lock()
        .unwrap()
        .insert("gone".into(), vec![Err((true, "conflict"))]);
    let runner = runner(&metrics, 2);
    let health = runner.health.clone();
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (recorder, subscription, stop) = (recorder.clone(), watch.subscribe(), stop.clone());
        async move {
            runner
                .run(
                    recorder,
                    vec![subscription],
                    Requeued::none(),
                    vec!["kept".into(), "gone".into()],
                    stop,
                )
                .await
        }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(attempts_of(&recorder, "gone").len(), 1);
    assert!(
        health.readiness(true).body.contains("conflict"),
        "degraded by the permanent error"
    );

    // `gone` is deleted while the watch is down: the relist lists `kept` only.
    *recorder.names.lock().unwrap() = vec!["kept".into()];
    watch.apply(Event::Init);
    watch.apply(Event::InitApply(object("kept")));
    watch.apply(Event::InitDone);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        attempts_of(&recorder, "gone").len(),
        2,
        "reconciled once more, as gone, though no cache names it"
    );
    assert!(
        !health.readiness(true).body.contains("conflict"),
        "its error is forgotten: {}",
        health.readiness(true).body
    );
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_key_requeued_during_its_reconcile_runs_again_after_it_and_an_idle_one_runs_now() {
    let metrics = Arc::new(Metrics::new());
    let watch = SharedWatch::new(resource(), &Default::default());
    let recorder = Arc::new(Recorder::default());
    let (requeue, requeued) = Requeue::channel();
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (recorder, subscription, stop, runner) =
            (recorder.clone(), watch.subscribe(), stop.clone(), runner(&metrics, 2));
        async move {
            runner
                .run(recorder, vec![subscription], requeued, vec!["a".into()], stop)
                .await
        }
    });
    // Each reconcile takes 10 ms: "a" is running when it is requeued.
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(attempts_of(&recorder, "a").len(), 1);
    requeue.key("a".to_owned());
    tokio::time::sleep(Duration::from_millis(2)).await;
    assert_eq!(attempts_of(&recorder, "a").len(), 1, "not twice at once");
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(attempts_of(&recorder, "a").len(), 2, "again once done");
    requeue.key("b".to_owned());
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(attempts_of(&recorder, "b").len(), 1);
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[test]
fn backoff_doubles_from_half_a_second_to_a_minute() {
    let waits: Vec<u64> = (0..10)
        .map(|n| Backoff::CONTROLLER.delay(n).as_millis() as u64)
        .collect();
    assert_eq!(
        waits,
        [500, 1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000]
    );
}

/// Holds its resync (every key) until another task of the runtime has run.
struct SlowResync {
    entered: std::sync::atomic::AtomicBool,
    other_task_ran: Mutex<std::sync::mpsc::Receiver<()>>,
    waited: Mutex<Option<bool>>,
}

impl Reconcile for SlowResync {
    type Key = String;
    type Error = TestError;
    type Report = std::convert::Infallible;

    fn keys_for(&self, _kind: &KindKey, change: &Change) -> Vec<String> {
        if change.object().is_none() {
            self.entered.store(true, Ordering::SeqCst);
            let receiver = self.other_task_ran.lock().unwrap();
            let ran = receiver.recv_timeout(Duration::from_secs(10)).is_ok();
            *self.waited.lock().unwrap() = Some(ran);
        }
        vec![]
    }

    async fn reconcile(&self, _key: &String) -> Result<Reconciled<Self::Report>, TestError> {
        Ok(Action::AwaitChange.into())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_resync_does_not_hold_up_the_threads_other_tasks() {
    let metrics = Arc::new(Metrics::new());
    let watch = SharedWatch::new(resource(), &Default::default());
    let (ran, other_task_ran) = std::sync::mpsc::channel();
    let slow = Arc::new(SlowResync {
        entered: Default::default(),
        other_task_ran: Mutex::new(other_task_ran),
        waited: Mutex::new(None),
    });
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (slow, subscription, stop, runner) = (slow.clone(), watch.subscribe(), stop.clone(), runner(&metrics, 1));
        async move {
            runner
                .run(slow, vec![subscription], Requeued::none(), vec![], stop)
                .await
        }
    });
    tokio::task::yield_now().await;
    // A task on the runtime's one worker thread that can only run while the resync is under way.
    tokio::spawn({
        let slow = slow.clone();
        async move {
            while !slow.entered.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            ran.send(()).unwrap();
        }
    });
    // The relist's end: the runner's resync blocks its thread until that task has run (it never would on the
    // one worker thread, unless the runner hands the thread's other tasks to another thread meanwhile).
    watch.apply(Event::Init);
    watch.apply(Event::InitDone);
    for _ in 0..200 {
        if slow.waited.lock().unwrap().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        *slow.waited.lock().unwrap(),
        Some(true),
        "the other task ran during the resync"
    );
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_reconcile_knows_how_long_ago_its_key_became_due() {
    assert_eq!(since_due(), None, "outside a reconcile");
    let metrics = Arc::new(Metrics::new());
    let recorder = Arc::new(Recorder::default());
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (recorder, stop, runner) = (recorder.clone(), stop.clone(), runner(&metrics, 1));
        async move {
            runner
                .run(recorder, vec![], Requeued::none(), vec!["a".into(), "b".into()], stop)
                .await
        }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    // One at a time, 10 ms each: `b` was due as long as `a` took.
    assert_eq!(
        *recorder.due_ages.lock().unwrap(),
        vec![
            ("a".to_owned(), Some(Duration::ZERO)),
            ("b".to_owned(), Some(Duration::from_millis(10)))
        ]
    );
    stop.cancel();
    task.await.unwrap().unwrap();
}

/// Reconciles names (10 ms, or as `took` says) and leaves a report of the attempt (`key#attempt`) that takes
/// 100 ms to write; `failing_reports` fail (transient) once each.
#[derive(Default)]
struct Reporter {
    took: HashMap<String, Duration>,
    failing_reports: Mutex<Vec<String>>,
    attempts: Mutex<Vec<(String, tokio::time::Instant)>>,
    /// Reports written: the report, when its write started and ended.
    written: Mutex<Vec<(String, tokio::time::Instant, tokio::time::Instant)>>,
    writing: AtomicUsize,
    max_writing: AtomicUsize,
    reported: Mutex<Vec<String>>,
}

impl Reconcile for Reporter {
    type Key = String;
    type Error = TestError;
    type Report = String;

    fn keys_for(&self, _kind: &KindKey, change: &Change) -> Vec<String> {
        change
            .object()
            .map(|object| vec![object.name_any()])
            .unwrap_or_default()
    }

    async fn reconcile(&self, key: &String) -> Result<Reconciled<String>, TestError> {
        let attempt = {
            let mut attempts = self.attempts.lock().unwrap();
            attempts.push((key.clone(), tokio::time::Instant::now()));
            attempts.iter().filter(|(k, _)| k == key).count()
        };
        let took = self.took.get(key).copied().unwrap_or(Duration::from_millis(10));
        tokio::time::sleep(took).await;
        Ok(Reconciled {
            action: Action::AwaitChange,
            report: Some(format!("{key}#{attempt}")),
        })
    }

    async fn report(&self, key: &String, report: String) -> Result<(), TestError> {
        let now = self.writing.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_writing.fetch_max(now, Ordering::SeqCst);
        let started = tokio::time::Instant::now();
        tokio::time::sleep(Duration::from_millis(100)).await;
        self.writing.fetch_sub(1, Ordering::SeqCst);
        let mut failing = self.failing_reports.lock().unwrap();
        if let Some(at) = failing.iter().position(|k| k == key) {
            failing.remove(at);
            return Err(TestError {
                permanent: false,
                message: "timeout".into(),
            });
        }
        self.written
            .lock()
            .unwrap()
            .push((report, started, tokio::time::Instant::now()));
        Ok(())
    }

    async fn report_error(&self, key: &String, error: &TestError) {
        self.reported.lock().unwrap().push(format!("{key}: {error}"));
    }
}

impl Reporter {
    fn attempts_of(&self, key: &str) -> Vec<tokio::time::Instant> {
        let attempts = self.attempts.lock().unwrap();
        attempts.iter().filter(|(k, _)| k == key).map(|(_, at)| *at).collect()
    }

    fn written(&self) -> Vec<String> {
        self.written
            .lock()
            .unwrap()
            .iter()
            .map(|(report, _, _)| report.clone())
            .collect()
    }
}

/// Starts `reconciler` on a runner of `concurrency` (reporting to `metrics`) with `initial` keys and the given
/// subscriptions.
fn start_runner<R: Reconcile<Key = String>>(
    reconciler: &Arc<R>,
    subscriptions: Vec<Subscription>,
    metrics: &Arc<Metrics>,
    concurrency: usize,
    initial: &[&str],
) -> (CancellationToken, tokio::task::JoinHandle<Result<(), WorkerError>>) {
    let stop = CancellationToken::new();
    let (reconciler, runner) = (reconciler.clone(), runner(metrics, concurrency));
    let initial = initial.iter().map(|k| k.to_string()).collect();
    let task = tokio::spawn({
        let stop = stop.clone();
        async move {
            runner
                .run(reconciler, subscriptions, Requeued::none(), initial, stop)
                .await
        }
    });
    (stop, task)
}

/// Starts `reporter` on a runner of `concurrency` with `initial` keys; the watch's changes reach it.
fn run_reporter(
    reporter: &Arc<Reporter>,
    watch: &SharedWatch,
    concurrency: usize,
    initial: &[&str],
) -> (CancellationToken, tokio::task::JoinHandle<Result<(), WorkerError>>) {
    start_runner(
        reporter,
        vec![watch.subscribe()],
        &Arc::new(Metrics::new()),
        concurrency,
        initial,
    )
}

/// Reports do not hold a reconcile slot, and go out fewer at a time: the reconciles of a burst are done long
/// before its reports.
#[tokio::test(start_paused = true)]
async fn reports_follow_their_reconciles_with_fewer_in_flight() {
    assert_eq!(
        (reports_in_flight(1), reports_in_flight(4), reports_in_flight(16)),
        (1, 1, 4)
    );
    let watch = SharedWatch::new(resource(), &Default::default());
    let reporter = Arc::new(Reporter::default());
    let start = tokio::time::Instant::now();
    let keys = ["a", "b", "c", "d", "e", "f", "g", "h"];
    let (stop, task) = run_reporter(&reporter, &watch, 4, &keys);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let last_attempt = reporter
        .attempts
        .lock()
        .unwrap()
        .iter()
        .map(|(_, at)| *at)
        .max()
        .unwrap();
    assert_eq!(
        last_attempt - start,
        Duration::from_millis(10),
        "two rounds of four reconciles, the second not waiting for the first's reports"
    );
    assert_eq!(reporter.attempts.lock().unwrap().len(), 8, "each key reconciled once");
    let mut written = reporter.written();
    written.sort();
    assert_eq!(written, keys.map(|k| format!("{k}#1")));
    assert_eq!(
        reporter.max_writing.load(Ordering::SeqCst),
        1,
        "a quarter of 4 in flight"
    );
    stop.cancel();
    task.await.unwrap().unwrap();
}

/// A change of a key whose report waits for its turn drops that report: the reconcile the change brings decides
/// the report anew, and only that one is written.
#[tokio::test(start_paused = true)]
async fn a_change_drops_a_waiting_report_and_reconciles_again() {
    let watch = SharedWatch::new(resource(), &Default::default());
    let mut reporter = Reporter::default();
    reporter.took.insert("b".into(), Duration::from_millis(20));
    let reporter = Arc::new(reporter);
    let (stop, task) = run_reporter(&reporter, &watch, 4, &["a", "b"]);
    // a's report is written from 10 to 110 ms; b's waits from 20 ms.
    tokio::time::sleep(Duration::from_millis(50)).await;
    watch.apply(Event::Apply(object("b")));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(reporter.attempts_of("b").len(), 2, "b reconciled again at once");
    assert_eq!(reporter.written(), ["a#1", "b#2"], "b's first report never written");
    stop.cancel();
    task.await.unwrap().unwrap();
}

/// A change of a key whose report is being written reconciles it again once the write is done, never during it.
#[tokio::test(start_paused = true)]
async fn a_change_during_a_report_write_waits_for_it() {
    let watch = SharedWatch::new(resource(), &Default::default());
    let reporter = Arc::new(Reporter::default());
    let start = tokio::time::Instant::now();
    let (stop, task) = run_reporter(&reporter, &watch, 4, &["a"]);
    tokio::time::sleep(Duration::from_millis(50)).await;
    watch.apply(Event::Apply(object("a")));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let attempts = reporter.attempts_of("a");
    assert_eq!(attempts.len(), 2);
    assert_eq!(
        attempts[1] - start,
        Duration::from_millis(110),
        "after the write (10 → 110 ms)"
    );
    assert_eq!(reporter.written(), ["a#1", "a#2"]);
    stop.cancel();
    task.await.unwrap().unwrap();
}

/// A report that fails is the reconcile's failure: reported once, the key backs off and is reconciled again.
#[tokio::test(start_paused = true)]
async fn a_failed_report_backs_off_like_a_failed_reconcile() {
    let watch = SharedWatch::new(resource(), &Default::default());
    let reporter = Arc::new(Reporter::default());
    reporter.failing_reports.lock().unwrap().push("a".into());
    let (stop, task) = run_reporter(&reporter, &watch, 4, &["a"]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let attempts = reporter.attempts_of("a");
    assert_eq!(attempts.len(), 2);
    assert_eq!(
        attempts[1] - attempts[0],
        Duration::from_millis(610),
        "reconcile 10 ms, the failed write 100 ms, then the first backoff, 500 ms"
    );
    assert_eq!(*reporter.reported.lock().unwrap(), ["a: timeout"]);
    assert_eq!(reporter.written(), ["a#2"]);
    stop.cancel();
    task.await.unwrap().unwrap();
}
