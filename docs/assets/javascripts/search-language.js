// Search in the page's language only.
//
// mkdocs-static-i18n merges both languages into one search index (search/search_index.json), so an English
// query on /en/ also found the Chinese pages (they quote the same flags and model names), and the other way round.
// Material hands the whole index to its search worker in one message ({type: 0, data: {config, docs, options}});
// this wraps the Worker so that the message carries only the documents of the page's language. Material creates the
// worker while its bundle runs, so measure/site/hooks.py puts this script right before the bundle (after the
// #__config script and the header it reads). tests/test_browser.py searches in both languages, so a Material upgrade
// that changes any of this shows there.
(function () {
  "use strict";
  var config = document.getElementById("__config");
  var selector = document.querySelectorAll(".md-select__link[hreflang]");
  if (!config || !selector.length || typeof window.Worker !== "function") return;

  // A document's language: the first folder of its location when that names a language of the selector
  // (en/pooling/ → en), else the default language, whose pages sit at the top.
  var locales = Array.prototype.map.call(selector, function (a) { return a.getAttribute("hreflang"); });
  var DEFAULT = "";
  function languageOf(location) {
    var first = location.replace(/^\/+/, "").split(/[/#?]/)[0];
    return locales.indexOf(first) >= 0 ? first : DEFAULT;
  }
  var base = new URL(JSON.parse(config.textContent).base, window.location.href);
  var here = decodeURI(window.location.pathname).slice(decodeURI(base.pathname).length);
  var language = languageOf(here);

  var NativeWorker = window.Worker;
  function LanguageWorker(url, options) {
    var worker = new NativeWorker(url, options);
    var post = worker.postMessage;
    worker.postMessage = function (message) {
      var args = Array.prototype.slice.call(arguments);
      if (message && message.type === 0 && message.data && Array.isArray(message.data.docs)) {
        var data = Object.assign({}, message.data, {
          docs: message.data.docs.filter(function (doc) { return languageOf(doc.location) === language; }),
        });
        args[0] = Object.assign({}, message, {data: data});
      }
      return post.apply(worker, args);
    };
    return worker;
  }
  LanguageWorker.prototype = NativeWorker.prototype;
  window.Worker = LanguageWorker;
})();
